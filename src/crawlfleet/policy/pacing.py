"""Adaptive pacing of a *lane*: how fast (``delay``) and how wide (``concurrency``) to crawl it.

A lane is the unit of pacing (today a domain; later a domain and a route). Nothing here depends
on what the key is: the store keeps one :class:`PacingState` per lane and folds every attempt into
it with :func:`update`, the clock passed in. The controller tells load from noise:

* **The rate of push-back, not single events.** 429s, 502/503/504s, block pages and requests that
  got no response at all are push-back. Their share among the lane's recent responses (an EWMA
  over about ``pushback_window`` responses) must pass ``pushback_share`` before the lane slows
  down; then the delay grows ``slowdown_factor`` times (from at least the spacing of its recent
  healthy answers), the concurrency narrows by ``window_factor`` (a quarter, never halved by one
  503), and the share is halved: the next slow-down needs new evidence. A few percent of random
  503s, cut connections and slow pages change nothing.
* **One slow-down per round trip**, as in TCP: answers to requests that started before the last
  slow-down took effect (``slowed_at``: after its hold, and after the start slots the store had
  already handed out at the old pace, at most ``lease_horizon`` seconds of them) were answered
  by it and count neither toward the share nor as a new 429.
* **A 429 is a hard signal.** It holds the lane for its ``Retry-After`` (or one new delay) and
  teaches a ceiling, ``limit_delay``: one over the rate of requests the host took (all but
  429s, counted by when they were sent, as a limiter counts them) in the ``rate_window``
  seconds before the 429 was sent, or of the healthy answers if higher: about what the host
  accepts, even for a lane younger than the window or just back from a hold. The lane goes on at
  ``limit_fraction`` of that rate and probes upward by ``probe`` a second but at most
  ``probe_step`` an answer (so a cycle from one 429 to the next is some 400 requests, whatever
  the limit); the next 429 teaches again (one 429 at most halves the ceiling). The width stays:
  a 429 is about the rate. Without push-back for ``limit_hold`` seconds the ceiling is forgotten.
* **Retry-After holds the lane** on a 429, when no response came (the worker postponing a host
  whose robots.txt is unreachable), and on other push-back while push-back is the rule (share
  above ``pushback_share``). A lone 503 with ``Retry-After`` holds its own request (the retry
  policy honours it), not the lane.
* **Latency against the lane's own unloaded baseline** (Vegas). The baseline is the lowest
  healthy latency seen, measured again every ``probe_every`` seconds while latency steers the
  pace (a pause of one typical latency, then one request alone); the typical latency is a running
  median (a slow page is an outlier, not load). The lane is loaded when the typical latency is
  past ``latency_ratio`` times the baseline and the excess, times the healthy rate, is more than
  ``queue_high`` requests waiting; then, once per round trip, it is paced at
  ``latency_backoff`` of the rate it delivers, so the queues drain while the bottleneck, wherever
  it is (the host, or a worker's own CPU), stays busy. Between half that band and all of it the
  pace holds; below, recovery slows down as it nears the band. A host answering in
  5 ms + 5 ms per request in flight settles at 1.5x its unloaded latency.
* **Recovery per unit of time, not per response.** While answers are healthy the delay shrinks
  by ``recover_factor`` a second (to ``limit_fraction`` of a learned ceiling; holds do not count)
  and the width doubles every ``recover_every`` seconds up to its maximum. A lane left at delay
  ``d`` by push-back that stopped is back to full pace within ``3 d + log2(d / snap)`` seconds
  with the defaults: one ``d`` of hold, one for the next start the store had spaced at ``d``,
  one for the start after it (2 ``d`` if the store pulls its next start in when the delay
  shrinks); from the 60 s maximum that is at most 196 s (the simulation measures 110 s, and
  50 s with the next start pulled in).
* **The host circuit.** A host that fails every request (no response or 5xx,
  ``circuit_threshold`` in a row) is closed as a whole for ``circuit_base`` seconds, doubling
  with each further opening up to ``circuit_cap``, and reopened one request at a time.

A fresh lane starts at ``start_concurrency`` requests in flight (one with a robots.txt
Crawl-delay) and doubles from there every ``recover_every`` seconds, so that its first contact
with a rate limit costs a couple of 429s, not a full window of them.

Pure and quick (about 5 µs an update, 7 for push-back): the store runs it for every completed
request, inside the complete/fail transaction. Every field of :class:`PacingState` is a JSON
scalar. ``crawlfleet.policy.simulate`` drives it against model sites on a fake clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from crawlfleet.policy.classify import Outcome
from crawlfleet.policy.pacing_config import PacingConfig

__all__ = ["PacingConfig", "PacingState", "initial", "update"]

#: statuses that say "not now" about the host (its gateway, its capacity), not about the request
PUSH_BACK_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class PacingState:
    """Where a lane's pacing stands. Every field is a JSON scalar.

    The store reads four of them at lease time: ``delay`` (least seconds between request starts),
    ``concurrency`` (most requests in flight), ``blocked_until`` (no request starts before this
    epoch time: Retry-After, host circuit) and ``floor`` (the least ``delay`` the lane allows:
    robots.txt Crawl-delay, capped). The others are the controller's memory:

    ``ewma_latency``: typical latency of healthy responses, a running median (None before the
    first).
    ``errors_in_row``: failures in a row (no response, or 5xx), for the host circuit.
    ``ok_in_row``: healthy answers since the last response that was not one.
    ``slowed_at``: requests started before this were answered by the last slow-down or circuit
    opening (it is when the new pace took effect: after the hold).
    ``limit_delay``: one over the rate a 429 showed the lane accepts (0: none learned).
    ``ok_rate`` / ``rate_at``: healthy responses per second (decaying), as of ``rate_at``.
    ``trips``: host circuit openings since the last response that was not a 5xx.
    ``window``: the concurrency before rounding (it grows and narrows by fractions).
    ``share``: push-back share among recent responses (EWMA).
    ``base_latency``: the lane's unloaded latency: the lowest healthy latency, forgotten slowly.
    ``shrunk_at``: when latency last narrowed the window (requests sent before do not again).
    ``probe_from``: a baseline probe is on: the first request started from then runs alone and
    its latency is the new baseline (0: none). ``probed_at``: when the last probe ended.
    ``burst_rate``: healthy responses per second over the last few round trips, as of
    ``rate_at``.
    ``slowdowns``: slow-downs so far (a 429's, or push-back become the rule): the controller's
    decisions, counted so that a crawl can tell noise from load afterwards without a clock.
    ``sent_from`` / ``sent_now`` / ``sent_before``: requests the host took (every attempt that
    reached it but a 429), counted by when they were *sent*, in ``rate_window`` buckets: the
    one starting at ``sent_from`` and the one before it. What a 429 teaches is read here.
    """

    delay: float
    concurrency: int
    ewma_latency: float | None
    blocked_until: float
    errors_in_row: int
    ok_in_row: int = 0
    floor: float = 0.0
    slowed_at: float = 0.0
    limit_delay: float = 0.0
    ok_rate: float = 0.0
    rate_at: float = 0.0
    trips: int = 0
    window: float = 0.0
    share: float = 0.0
    base_latency: float | None = None
    shrunk_at: float = 0.0
    probe_from: float = 0.0
    probed_at: float = 0.0
    burst_rate: float = 0.0
    slowdowns: int = 0
    sent_from: float = 0.0
    sent_now: float = 0.0
    sent_before: float = 0.0


#: the PacingState field names, for stores that keep the state as one document
STATE_FIELDS = tuple(f.name for f in fields(PacingState))


def initial(config: PacingConfig, crawl_delay: float | None = None) -> PacingState:
    """Pacing for a lane not seen before: ``start_concurrency`` in flight, no delay beyond
    ``min_delay``. A robots.txt ``Crawl-delay`` (capped at ``crawl_delay_cap``) becomes the
    lane's delay floor and starts it at ``min_concurrency``."""
    floor = config.min_delay
    width = max(config.min_concurrency, min(config.start_concurrency, config.max_concurrency))
    if crawl_delay is not None and crawl_delay > 0:
        floor = max(floor, min(crawl_delay, config.crawl_delay_cap))
        width = config.min_concurrency
    return PacingState(floor, width, None, 0.0, 0, floor=floor, window=float(width))


def update(
    state: PacingState,
    config: PacingConfig,
    *,
    now: float,
    outcome: Outcome,
    status: int | None,
    latency: float | None,
    retry_after: float | None,
    started: float | None = None,
) -> PacingState:
    """The lane's pacing after one attempt.

    ``status`` is None when no response arrived (timeout, connection error); ``latency`` is the
    response time in seconds, when there was one; ``retry_after`` the parsed Retry-After in
    seconds (capped at ``retry_after_cap``; see the module docstring for when it holds the
    lane). ``started`` is when the request was sent (default ``now``): responses to requests
    sent before the last slow-down took effect were answered by it and do not count again.
    """
    started = now if started is None else started
    if status is None and outcome is not Outcome.RETRYABLE_ERROR:
        # no response and nothing learned about the host (robots refusal, trap, refused
        # address), unless the worker postpones the whole host (robots.txt unreachable)
        if retry_after is None:
            return state
        until = now + min(max(retry_after, 0.0), config.retry_after_cap)
        return _with(state, blocked_until=max(state.blocked_until, until))
    pushback = status is None or status in PUSH_BACK_STATUSES or outcome is Outcome.BLOCKED
    if not pushback and status is not None and status < 500:
        # only pages tell the lane's latency: a 404 or a redirect left over is often quicker
        page = outcome is Outcome.OK and status < 400
        return _answered(state, config, now, page, latency, started)
    return _troubled(state, config, now, status, pushback, retry_after, started)


def _with(state: PacingState, **changes: Any) -> PacingState:
    return replace(state, **changes)


def _sent(state: PacingState, config: PacingConfig, started: float) -> dict[str, float]:
    """The sent counts with one more request the host took, sent at ``started`` (one sent
    before the previous bucket is too old to count; a clock stepping back changes nothing)."""
    width = config.rate_window
    start, now, before = state.sent_from, state.sent_now, state.sent_before
    if start and start - width <= started < start:
        before += 1.0
    elif start and start <= started < start + width:
        now += 1.0
    elif start and start + width <= started < start + 2 * width:
        start, now, before = start + width, 1.0, now
    elif not start or started >= start + 2 * width:
        start, now, before = math.floor(started / width) * width, 1.0, 0.0
    return {"sent_from": start, "sent_now": now, "sent_before": before}


def _sent_rate(state: PacingState, config: PacingConfig, at: float) -> float:
    """Requests a second the host took in the ``rate_window`` seconds before ``at``, by send
    time (a sliding window from two buckets, the older weighted by its part inside)."""
    width, start = config.rate_window, state.sent_from
    if not start or at < start - width:
        return 0.0
    if at < start:  # sent in the previous bucket: what came before it is not counted here
        return state.sent_before / width
    into = (at - start) / width
    if into < 1.0:
        return (state.sent_before * (1.0 - into) + state.sent_now) / width
    if into < 2.0:
        return state.sent_now * (2.0 - into) / width
    return 0.0


def _decayed_rate(state: PacingState, config: PacingConfig, now: float) -> float:
    if state.ok_rate <= 0.0:
        return 0.0
    return state.ok_rate * math.exp(-max(0.0, now - state.rate_at) / config.rate_window)


def _least_delay(state: PacingState, config: PacingConfig) -> float:
    return max(config.min_delay, state.floor)


def _clamp_delay(delay: float, least: float, config: PacingConfig) -> float:
    return min(max(delay, least), max(config.max_delay, least))


def _window(state: PacingState, config: PacingConfig) -> float:
    """The fractional concurrency, within the lane's current bounds. The store's width wins
    when the two disagree (it set a new limit, or the row was written by another version)."""
    window = state.window
    if _width(window, config) != state.concurrency:
        window = float(state.concurrency)
    return min(max(window, float(config.min_concurrency)), float(config.max_concurrency))


def _width(window: float, config: PacingConfig) -> int:
    return max(config.min_concurrency, min(config.max_concurrency, int(window + 0.5)))


def _answered(
    state: PacingState,
    config: PacingConfig,
    now: float,
    ok: bool,
    latency: float | None,
    started: float,
) -> PacingState:
    """:func:`update` for an answer below 500 that is not push-back (the common case: a page,
    or a 404): the host is alive and accepting, the latency estimates move (pages only), and
    the time since the previous update (holds excluded) counts toward recovery of the delay and
    the window, unless the typical latency shows load: then the delay grows instead (once per
    round trip) or holds. Built in one step: the store folds every completed request through
    here."""
    # healthy time at the current pace: since the last healthy answer, not counting a hold
    dt = max(0.0, now - max(state.rate_at, state.slowed_at)) if state.rate_at else 0.0
    counted = started >= state.slowed_at
    share = state.share * (1.0 - 1.0 / config.pushback_window) if counted else state.share
    typical, base = state.ewma_latency, state.base_latency
    probe_from, probed_at = state.probe_from, state.probed_at
    if ok and latency is not None and latency > 0.0:
        if base is None or typical is None:
            typical = base = latency
            probed_at = now  # the first answers come at the start-up width: a baseline
        else:
            if probe_from and started >= probe_from:
                # the first request after a probe's pause ran alone: the unloaded latency now
                base, probe_from, probed_at = latency, 0.0, now
            else:
                base = min(base, latency)
            # a running median: a slow page moves it no more than any page slower than usual
            if latency > typical:
                typical *= math.exp(config.latency_step)
            elif latency < typical:
                typical *= math.exp(-config.latency_step)
    ok_rate = _decayed_rate(state, config, now)
    # the same count over a few round trips: what the lane delivers right now (after a stall
    # of slow pages the one-second rate still remembers the stall)
    burst_span = max(config.rate_window / 10, 4.0 * (typical or 0.0))
    burst_rate = state.burst_rate * math.exp(-max(0.0, now - state.rate_at) / burst_span)
    limit_delay = state.limit_delay
    if limit_delay and now - state.slowed_at >= config.limit_hold:
        limit_delay = 0.0  # no 429 for long: the ceiling is forgotten
    load, headroom = _load(typical, base, ok_rate, config)
    shrunk_at = state.shrunk_at
    if load > 1 and typical is not None and base is not None:
        delay = _clamp_delay(state.delay, _least_delay(state, config), config)
        # once per round trip, gently, and only while this response shows the load too (the
        # median lags: at a slower pace it would keep slowing down on old news)
        now_loaded = ok and latency is not None and _load(latency, base, ok_rate, config)[0] > 1
        if started >= shrunk_at and now_loaded:
            # Just under the rate the lane delivers (its bottleneck, wherever it is), so the
            # queues drain and the bottleneck stays busy. The rates count answers already in;
            # the window over the latency is what the requests in flight will deliver (after
            # a stall, or at start-up, the counts lag far behind it). Too high is cheap: the
            # next round trips take it down 10% at a time; too low costs seconds of recovery.
            delivered = max(ok_rate, burst_rate, state.concurrency / typical)
            shrunk_at = now + _settling(state, config)
            paced = max(delay, 1.0 / delivered) / config.latency_backoff
            delay = _clamp_delay(paced, delay, config)
    elif load:
        delay = _clamp_delay(state.delay, _least_delay(state, config), config)  # in the band
    else:
        delay = _recovered_delay(state, config, dt, headroom, limit_delay)
    blocked_until = state.blocked_until
    if load and not probe_from and typical is not None and now - probed_at >= config.probe_every:
        # Latency steers the pace, against a baseline maybe long gone: pause for one typical
        # latency once the requests already leased have started, and measure the next one.
        probe_from = now + _settling(state, config) + min(typical, config.max_delay)
        blocked_until = max(blocked_until, probe_from)
    window = _window(state, config)
    if dt and share < config.pushback_share:
        window = min(float(config.max_concurrency), _grown(window, dt / config.recover_every))
    return PacingState(
        delay=delay,
        concurrency=_width(window, config),
        ewma_latency=typical,
        blocked_until=blocked_until,
        errors_in_row=0,
        ok_in_row=state.ok_in_row + 1,
        floor=state.floor,
        slowed_at=state.slowed_at,
        limit_delay=limit_delay,
        ok_rate=ok_rate + 1.0 / config.rate_window,
        burst_rate=burst_rate + 1.0 / burst_span,
        rate_at=max(now, state.rate_at),
        trips=0,
        window=window,
        share=share,
        base_latency=base,
        shrunk_at=shrunk_at,
        probe_from=probe_from,
        probed_at=probed_at,
        slowdowns=state.slowdowns,
        **_sent(state, config, started),
    )


#: past this many doublings (or halvings) any bound has long won; a lane idle for hours or
#: years would otherwise overflow a float (2.0 ** 1024) and the store would refuse its updates
_MAX_DOUBLINGS = 64.0


def _grown(window: float, doublings: float) -> float:
    """``window`` doubled ``doublings`` times, without overflow for any idle time."""
    return window * math.exp2(min(max(doublings, 0.0), _MAX_DOUBLINGS))


def _settling(state: PacingState, config: PacingConfig) -> float:
    """How long requests leased at the old pace may still be starting: the store hands out up
    to ``concurrency`` start slots ahead, ``delay`` apart, within ``lease_horizon``. Their
    answers are no news about a change made now."""
    return min(state.concurrency * state.delay, config.lease_horizon + state.delay)


def _load(
    typical: float | None, base: float | None, rate: float, config: PacingConfig
) -> tuple[int, float]:
    """How loaded the lane looks from its latency, and how much room is left below the band
    where the pace holds (1: at the baseline, 0: in the band).

    Load 2 when ``typical`` is past ``latency_ratio`` times ``base`` and the excess, at this
    ``rate``, is more than ``queue_high`` requests waiting (Vegas: rate x extra latency is what
    sits in queues); 1 in the band past half of both, where the pace holds; 0 below."""
    if typical is None or base is None or typical <= base:
        return 0, 1.0
    queued = rate * (typical - base)
    middle = (1.0 + config.latency_ratio) / 2
    if typical > base * config.latency_ratio and queued > config.queue_high:
        return 2, 0.0
    if typical > base * middle and queued > config.queue_high / 2:
        return 1, 0.0
    used = min(queued / (config.queue_high / 2), (typical / base - 1.0) / (middle - 1.0))
    return 0, max(0.0, 1.0 - used)


def _recovered_delay(
    state: PacingState, config: PacingConfig, dt: float, headroom: float, limit_delay: float
) -> float:
    """The delay after ``dt`` healthy seconds: down by ``recover_factor`` a second to
    ``limit_fraction`` of a learned ceiling, by ``probe`` a second below that. The first
    slows down as the latency nears the band where the pace holds (``headroom`` 1 at the
    baseline, 0 at the band): near the knee a fast climb overshoots it."""
    least = _least_delay(state, config)
    delay = state.delay
    if dt <= 0.0 or delay <= least:
        return _clamp_delay(delay, least, config)
    resume = limit_delay / config.limit_fraction if limit_delay else least
    if delay > resume:
        delay = max(resume, delay * config.recover_factor ** min(dt * headroom, _MAX_DOUBLINGS))
    elif limit_delay:  # above the ceiling's resume point: probe, slowly in time and in requests
        delay *= math.exp(-min(config.probe * dt, config.probe_step))
    if not limit_delay and delay < least + config.snap:
        delay = least
    return _clamp_delay(delay, least, config)


def _troubled(
    state: PacingState,
    config: PacingConfig,
    now: float,
    status: int | None,
    pushback: bool,
    retry_after: float | None,
    started: float,
) -> PacingState:
    """:func:`update` for push-back (429, 502-504, blocks, no response) and other 5xx."""
    counted = started >= state.slowed_at
    share = state.share
    if counted:
        share += (float(pushback) - share) / config.pushback_window
    if status is None or status >= 500:
        state = _host_failure(state, config, now, started)
    else:
        state = _with(state, errors_in_row=0, trips=0)  # a 429 or a block page: alive
    blocked_until = state.blocked_until
    if retry_after is not None and (status == 429 or share >= config.pushback_share):
        until = now + min(max(retry_after, 0.0), config.retry_after_cap)
        blocked_until = max(blocked_until, until)
    sent = _sent(state, config, started) if status != 429 else {}
    state = _with(state, blocked_until=blocked_until, share=share, ok_in_row=0, **sent)
    if not counted or not pushback:
        return state
    if status == 429:
        return _slow_down(state, config, now, learn=True, started=started)
    if share >= config.pushback_share:
        return _slow_down(state, config, now, learn=False)
    return state


def _slow_down(
    state: PacingState, config: PacingConfig, now: float, learn: bool, started: float = 0.0
) -> PacingState:
    """Slow the lane down once: a 429 (sent at ``started``) teaches a ceiling (``learn``) and
    keeps the width; push-back become the rule doubles the delay and narrows the window.

    The ceiling is what the host took in the ``rate_window`` before the 429 was sent, counted
    by send time (what a limiter counts), or the healthy answers' rate if higher. The answers'
    rate alone decays over the window: it remembers a hold or a stall of the worker, and a
    lane young as the window (the first 429 of a crawl) has not run a whole window yet."""
    least = _least_delay(state, config)
    accepted = _decayed_rate(state, config, now)
    if learn:
        accepted = max(accepted, _sent_rate(state, config, started))
    limit_delay, window = state.limit_delay, _window(state, config)
    if learn and accepted > 0.0:
        learned = 1.0 / accepted
        if limit_delay:  # one 429 at most halves the rate learned before
            learned = min(learned, limit_delay * config.slowdown_factor)
        limit_delay = min(learned, config.max_delay)
        delay = max(state.delay, limit_delay / config.limit_fraction)
    else:
        start = 1.0 / accepted if accepted > 0.0 else config.slowdown_floor
        delay = max(state.delay, start) * config.slowdown_factor
        if not learn:
            window = max(float(config.min_concurrency), window * config.window_factor)
    delay = _clamp_delay(delay, least, config)
    # never answered at once: nothing starts before one new delay has passed
    blocked_until = max(state.blocked_until, now + delay)
    return _with(
        state,
        delay=delay,
        concurrency=_width(window, config),
        window=window,
        limit_delay=limit_delay,
        blocked_until=blocked_until,
        slowed_at=max(now + _settling(state, config), blocked_until),
        share=state.share / 2,  # the next slow-down needs new evidence
        slowdowns=state.slowdowns + 1,
    )


def _host_failure(
    state: PacingState, config: PacingConfig, now: float, started: float
) -> PacingState:
    """No response, or a 5xx: one more failure in a row; enough of them open the circuit."""
    errors = state.errors_in_row + 1
    if errors < config.circuit_threshold or started < state.slowed_at:
        return _with(state, errors_in_row=errors)  # not yet, or sent before it last opened
    exponent = min(state.trips, 62)
    pause = min(config.circuit_cap, config.circuit_base * math.ldexp(1.0, exponent))
    blocked_until = max(state.blocked_until, now + pause)
    return _with(
        state,
        errors_in_row=errors,
        blocked_until=blocked_until,
        slowed_at=blocked_until,
        trips=state.trips + 1,
        concurrency=config.min_concurrency,  # reopen with one probe at a time
        window=float(config.min_concurrency),
    )
