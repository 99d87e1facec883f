"""Which fetcher a request of an ``auto`` spider uses: the ladder ``http → impersonate →
browser``, learnt per domain and page type (pure).

**The domain's rung.** A bot wall judges the client (its TLS ClientHello, its HTTP/2
settings), so its verdict holds for a whole domain: a page blocked on a rung *with evidence
that the rung is what was judged* (:func:`climbs`: a challenge or captcha page, a vendor's
denial, a 403 page; not a bare 429 or 503, which are load and pacing's business) goes one
rung up at once, no attempt used, and the domain's rung is raised for every new request of it
(stored under the pattern :data:`DOMAIN`, fleet-wide). One in :data:`PROBE_EVERY` new requests
of a domain above ``http`` probes one rung down (by a byte of its fingerprint, so every worker
agrees); a probe that gets the page lowers the domain's rung again, one that is blocked climbs
like any page. Each blocked probe in a row halves the share (:func:`probe_down_every`, down to
one in :data:`PROBE_EVERY_MAX`): a wall that keeps judging the lower rung costs a few fetches,
not one page in sixteen for the whole crawl.

**The page type's need.** A page type (domain and :func:`~crawlfleet.policy.traps.page_type`)
is judged in the browser: it needs the browser when the rendered page gives the spider more
than the raw document; the domain's rung will do otherwise. Requests of a type judged
``browser`` go straight to browser workers, but one in :data:`PROBE_EVERY` is still sent to
the domain's rung, to learn whether the type still needs the browser: if the spider gets its
records from the raw page the type is judged ``http`` (no browser needed); if not, the request
goes on to the browser without using an attempt.

A crawl therefore never dies ``blocked`` on a rung it has not tried: only the browser, the top,
retries blocks as a fixed fetcher does.
"""

from __future__ import annotations

from typing import Final

from crawlfleet.model import LADDER

__all__ = [
    "DOMAIN",
    "LADDER",
    "PROBE_EVERY",
    "climbs",
    "fetcher_for",
    "higher",
    "probe_down_every",
    "probes_back",
    "probes_down",
    "rung_above",
    "rung_of",
]

#: one in this many new requests of a page type judged ``browser`` (or of a domain above
#: ``http``) tries the rung below
PROBE_EVERY: Final = 16
#: the smallest probe-down share a domain whose probes keep being blocked falls to (one in this
#: many; divides 256, like every share of a fingerprint's byte)
PROBE_EVERY_MAX: Final = 256
#: the page-type pattern under which a domain's rung is stored (no page type is empty)
DOMAIN: Final = ""
# block reasons that are load, not a verdict on the client: pacing slows down, nothing climbs
_LOAD: Final = frozenset({"status:429", "status:503", "empty", "structure:scripts-only"})


def rung_of(fetcher: str | None) -> str:
    """The rung a request's fetcher stands on (``auto``: the bottom, http)."""
    return fetcher if fetcher in LADDER else LADDER[0]


def rung_above(rung: str) -> str | None:
    """The next rung up, or None at the top (the browser)."""
    i = LADDER.index(rung_of(rung))
    return LADDER[i + 1] if i + 1 < len(LADDER) else None


def higher(a: str | None, b: str | None) -> str | None:
    """The higher of two rungs (None: not known)."""
    if a is None or b is None:
        return a or b
    return a if LADDER.index(rung_of(a)) >= LADDER.index(rung_of(b)) else b


def climbs(reason: str | None) -> bool:
    """Whether a block of this reason (:data:`~crawlfleet.policy.blocks.REASONS`) is evidence
    that the rung was judged: challenge, captcha and denial pages, a vendor's markers, a 403
    page, the spider's own test; not a bare 429 or 503 (load), an empty page, or a scripted
    shell (the page type's need, judged in the browser)."""
    return bool(reason) and reason not in _LOAD


def probes_back(fingerprint: bytes, every: int = PROBE_EVERY) -> bool:
    """True for the one request in ``every`` (by its fingerprint, a hash: its first byte is
    uniform, so ``every`` divides 256 for an exact share) whose page type probes back."""
    return fingerprint[0] % every == 0


def probes_down(fingerprint: bytes, every: int = PROBE_EVERY) -> bool:
    """True for the one request in ``every`` that probes the rung below its domain's (another
    byte than :func:`probes_back`'s: the two probes are independent)."""
    return len(fingerprint) > 1 and fingerprint[1] % every == 0


def probe_down_every(blocked: int, every: int = PROBE_EVERY) -> int:
    """One in how many new requests of a domain probe a rung down after ``blocked`` probes in a
    row were blocked: ``every``, halved for each (never rarer than :data:`PROBE_EVERY_MAX`)."""
    if blocked <= 0:
        return every
    return max(every, min(PROBE_EVERY_MAX, every << min(blocked, 16)))


def _below(rung: str) -> str:
    i = LADDER.index(rung_of(rung))
    return LADDER[max(0, i - 1)]


def fetcher_for(
    spider_fetcher: str,
    needs: str | None,
    *,
    fingerprint: bytes,
    domain_rung: str | None = None,
    every: int = PROBE_EVERY,
    down_every: int | None = None,
) -> str:
    """The fetcher of a new request with none of its own.

    ``spider_fetcher`` is the spider's; ``needs`` what its page type was judged to need (None:
    not judged yet); ``domain_rung`` the rung its domain was raised to (None: http). A spider
    that is not ``auto`` keeps its fetcher. An ``auto`` request starts on its domain's rung
    (``auto`` for http: the pipeline judges it there), or one below for a probe down; on the
    browser when its type needs it (and it is no probe back). A type not judged yet starts on
    the rung too, even while a page of it is being judged in the browser: a guess pins no page
    to the browser (most scripted pages turn out fine raw, and a page pinned there is rendered
    whatever the judgement says); one fetched raw meanwhile waits for the judgement instead
    (:meth:`~crawlfleet.worker.attempt.escalate.Escalate.wait_for_judgement`).
    ``down_every`` is the probe-down share (default ``every``; see :func:`probe_down_every`).
    """
    if spider_fetcher != "auto":
        return spider_fetcher
    rung = rung_of(domain_rung)
    if rung != LADDER[0] and probes_down(fingerprint, down_every or every):
        rung = _below(rung)
    raw = "auto" if rung == LADDER[0] else rung
    if rung == "browser":
        return raw
    if needs == "browser" and not probes_back(fingerprint, every):
        return "browser"
    return raw
