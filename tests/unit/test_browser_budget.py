"""The browser pool's pure parts: admission, restarts, recycling, slot choice, error mapping,
the route guard's verdicts and the orphan sweep's bookkeeping. No browser, no sleeps."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from crawlfleet.errors import (
    AddressRefused,
    BrowserError,
    ConnectError,
    DataLoss,
    FetchTimeout,
    NotRenderable,
    TooManyRedirects,
)
from crawlfleet.fetch.browser import procs
from crawlfleet.fetch.browser.budget import (
    Admission,
    PoolState,
    RestartReason,
    SlotView,
    admission,
    choose_slot,
    context_spent,
    contexts_after_restart,
    restart_reason,
    sample_due,
)
from crawlfleet.fetch.browser.result import XhrResponse, classify_error
from crawlfleet.fetch.browser.routing import RouteGuard
from crawlfleet.fetch.browser.settings import BASE_FLAGS, BrowserSettings, launch_args

MB = 1024 * 1024
S = BrowserSettings(contexts=4, pages_per_context=3, pages_per_browser=10, memory_budget=1000 * MB)


def state(in_flight: int = 0, pages: int = 1, rss: int | None = 100 * MB, broken: bool = False):
    return PoolState(in_flight=in_flight, pages_on_browser=pages, memory=rss, broken=broken)


@pytest.mark.parametrize(
    ("st", "expected"),
    [
        (state(), Admission.ADMIT),
        (state(in_flight=3), Admission.ADMIT),
        (state(in_flight=4), Admission.WAIT),  # every context busy
        (state(rss=None), Admission.ADMIT),  # not measured yet
        # tight (>= 80% of the budget): one page at a time
        (state(in_flight=1, rss=800 * MB), Admission.WAIT),
        (state(in_flight=0, rss=800 * MB), Admission.ADMIT),
        (state(in_flight=1, rss=799 * MB), Admission.ADMIT),
        # over the budget: drain, then restart
        (state(in_flight=2, rss=1000 * MB), Admission.WAIT),
        (state(in_flight=0, rss=1000 * MB), Admission.RESTART),
        # a fresh browser over a budget set too low admits one at a time, never loops
        (state(in_flight=0, pages=0, rss=5000 * MB), Admission.ADMIT),
        (state(in_flight=1, pages=0, rss=5000 * MB), Admission.WAIT),
        # K pages served: drain, then restart
        (state(in_flight=1, pages=10), Admission.WAIT),
        (state(in_flight=0, pages=10), Admission.RESTART),
        (state(in_flight=0, pages=9), Admission.ADMIT),
        (state(in_flight=2, broken=True), Admission.WAIT),
        (state(in_flight=0, broken=True), Admission.RESTART),
    ],
)
def test_admission(st: PoolState, expected: Admission) -> None:
    assert admission(st, S) is expected


def test_admission_under_a_lowered_context_limit() -> None:
    assert admission(state(in_flight=2), S, contexts=2) is Admission.WAIT
    assert admission(state(in_flight=1), S, contexts=2) is Admission.ADMIT


@pytest.mark.parametrize(
    ("contexts", "reason", "pages", "expected"),
    [
        (4, RestartReason.MEMORY, 7, 3),  # over budget before 2 pages per context: one fewer
        (4, RestartReason.MEMORY, 8, 4),  # it grew there: a restart helps
        (1, RestartReason.MEMORY, 0, 1),  # never below one
        (3, RestartReason.PAGES, 10, 4),  # a clean restart gives one back...
        (4, RestartReason.PAGES, 10, 4),  # ...up to the settings' N
        (3, RestartReason.BROKEN, 1, 3),
    ],
)
def test_contexts_after_restart(
    contexts: int, reason: RestartReason, pages: int, expected: int
) -> None:
    assert contexts_after_restart(contexts, reason, pages, S) == expected


def test_restart_reasons_in_order() -> None:
    assert restart_reason(state(broken=True, pages=10, rss=2000 * MB), S) is RestartReason.BROKEN
    assert restart_reason(state(pages=10, rss=2000 * MB), S) is RestartReason.PAGES
    assert restart_reason(state(rss=2000 * MB), S) is RestartReason.MEMORY
    assert restart_reason(state(rss=999 * MB), S) is None


def test_sample_due() -> None:
    assert sample_due(None, 5.0, 0.5)
    assert not sample_due(5.0, 5.4, 0.5)
    assert sample_due(5.0, 5.5, 0.5)


def test_context_spent_after_m_pages() -> None:
    assert [context_spent(n, S) for n in range(1, 5)] == [False, False, True, True]


def views(*specs: tuple[str, bool, float]) -> list[SlotView]:
    return [SlotView(key, busy, used) for key, busy, used in specs]


def test_slot_choice_reuses_the_identity_most_recently_used() -> None:
    slots = views(("a", False, 1.0), ("b", False, 2.0), ("a", False, 3.0), ("a", True, 4.0))
    choice = choose_slot(slots, "a", capacity=4)
    assert choice is not None
    assert (choice.action, choice.index) == ("reuse", 2)


def test_slot_choice_opens_a_context_while_there_is_room() -> None:
    choice = choose_slot(views(("a", True, 1.0), ("b", False, 2.0)), "c", capacity=3)
    assert choice is not None
    assert choice.action == "create"


def test_slot_choice_evicts_the_least_recently_used_idle_identity() -> None:
    slots = views(("a", True, 1.0), ("b", False, 5.0), ("c", False, 2.0))
    choice = choose_slot(slots, "d", capacity=3)
    assert choice is not None
    assert (choice.action, choice.index) == ("evict", 2)


def test_slot_choice_waits_when_every_context_is_busy() -> None:
    assert choose_slot(views(("a", True, 1.0), ("b", True, 2.0)), "a", capacity=2) is None


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="contexts"):
        BrowserSettings(contexts=0)
    with pytest.raises(ValueError, match="admit_fraction"):
        BrowserSettings(admit_fraction=1.5)
    with pytest.raises(ValueError, match="wait_until"):
        BrowserSettings(wait_until="idle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memory_metric"):
        BrowserSettings(memory_metric="pss")  # type: ignore[arg-type]


def test_launch_flags() -> None:
    args = launch_args(BrowserSettings(extra_args=("--lang=de",)))
    for flag in ("--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"):
        assert flag in args
    assert args[-1] == "--lang=de"
    # Playwright passes its own --disable-features list; a second one would replace it.
    assert not any(a.startswith("--disable-features") for a in BASE_FLAGS)


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("Page.goto: Timeout 20000ms exceeded.", FetchTimeout),
        ("Page.goto: net::ERR_CONNECTION_REFUSED at http://x/", ConnectError),
        ("Page.goto: net::ERR_NAME_NOT_RESOLVED at http://x/", ConnectError),
        ("Page.goto: net::ERR_CERT_AUTHORITY_INVALID at https://x/", ConnectError),
        ("Page.goto: net::ERR_TIMED_OUT at http://x/", FetchTimeout),
        ("Page.goto: net::ERR_EMPTY_RESPONSE at http://x/", DataLoss),
        ("Page.goto: net::ERR_TOO_MANY_REDIRECTS at http://x/", TooManyRedirects),
        ("Page.goto: net::ERR_ACCESS_DENIED at http://x/", AddressRefused),
        ("Page.goto: Download is starting", NotRenderable),
        ("Page.goto: Target page, context or browser has been closed", BrowserError),
        ("Page.content: Page crashed", BrowserError),
    ],
)
def test_playwright_errors_map_to_the_tree(message: str, error: type[Exception]) -> None:
    assert classify_error(message) is error


def test_xhr_repr_masks_credentials() -> None:
    xhr = XhrResponse("http://u:secret@h/api", 200, "application/json", b"{}")
    assert "secret" not in repr(xhr)


class Guard:
    """Guard settings as the fetcher passes them: 127.0.0.1 is a seed host."""

    allow_private_addresses = False
    private_ok_hosts = frozenset({"127.0.0.1", "seed.test"})


async def test_route_guard_verdicts(clock) -> None:  # type: ignore[no-untyped-def]
    answers = {"public.test": ["93.184.216.34"], "inside.test": ["10.1.2.3"], "seed.test": []}
    lookups: list[str] = []

    async def resolve(host: str) -> list[str] | None:
        lookups.append(host)
        return answers.get(host)

    guard = RouteGuard(Guard(), resolve=resolve, clock=clock)
    assert await guard.refusal("http://127.0.0.1:8080/page") is None
    assert await guard.refusal("https://public.test/x") is None
    assert await guard.refusal("http://seed.test/") is None  # a seed host is never looked up
    assert "is not http(s)" in (await guard.refusal("file:///etc/passwd") or "")
    assert "is not http(s)" in (await guard.refusal("ftp://public.test/") or "")
    assert "non-public" in (await guard.refusal("http://127.0.0.2/") or "")
    assert "non-public" in (await guard.refusal("http://0x7f.2/") or "")  # 127.0.0.2
    assert "non-public" in (await guard.refusal("http://[::1]:80/") or "")
    assert "10.1.2.3" in (await guard.refusal("http://inside.test/admin") or "")
    # Behind a proxy the proxy resolves names: only literals are judged here.
    assert await guard.refusal("http://inside.test/admin", resolve_names=False) is None
    assert await guard.refusal("http://unknown.test/") is None  # the browser reports NXDOMAIN
    assert lookups == ["public.test", "inside.test", "unknown.test"]
    await guard.refusal("http://inside.test/again")
    assert lookups.count("inside.test") == 1  # cached
    clock.advance(61)
    await guard.refusal("http://inside.test/again")
    assert lookups.count("inside.test") == 2


def test_read_proc_of_this_process() -> None:
    me = procs.read_proc(os.getpid())
    assert me is not None
    assert me.pid == os.getpid() and me.ppid == os.getppid() and me.rss > 0
    # user + system seconds, as the kernel counts them in clock ticks
    assert 0 < me.cpu <= time.process_time() + 0.05
    assert procs.read_proc(2**22 + 7) is None  # above pid_max: never a process
    # found among its parent's descendants (its CPU seconds and RSS move between the two reads)
    assert me.pid in [p.pid for p in procs.descendants(os.getppid())]


def test_memory_of_this_process() -> None:
    mem = procs.memory_of(os.getpid())
    assert mem is not None
    assert 0 < mem.anon < mem.rss  # the interpreter's binary and libraries are file pages
    assert procs.memory_of(2**22 + 7) is None
    tree = procs.tree_memory(os.getpid())
    assert tree.rss >= mem.rss and tree.anon >= mem.anon


def test_owner_markers() -> None:
    marker = procs.owner_marker("abc")
    pid, start, token = marker.split(":")
    assert int(pid) == os.getpid() and token == "abc"
    assert procs.owner_alive(marker)
    assert not procs.owner_alive(f"{os.getpid()}:{int(start) + 1}:abc")  # same pid, reused
    assert not procs.owner_alive(f"{2**22 + 7}:1:abc")
    assert procs.owner_alive("garbage")  # unreadable markers are never judged dead


def test_sweep_removes_dead_owners_registrations_only(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    dead_profile = tmp_path / (procs.PROFILE_PREFIX + "dead")
    live_profile = tmp_path / (procs.PROFILE_PREFIX + "live")
    not_a_profile = tmp_path / "precious"
    for d in (dead_profile, live_profile, not_a_profile):
        (d / "Default").mkdir(parents=True)
    # A dead owner whose browser pid is not running: nothing to kill, the profile goes.
    dead = {
        "owner": f"{2**22 + 7}:1:t1",
        "pid": 2**22 + 9,
        "start": 5,
        "profile": str(dead_profile),
    }
    live = {"owner": procs.owner_marker("t2"), "pid": 2**22 + 11, "start": 5,
            "profile": str(live_profile)}  # fmt: skip
    odd = {"owner": f"{2**22 + 13}:1:t3", "pid": 2**22 + 15, "start": 5,
           "profile": str(not_a_profile)}  # fmt: skip
    for name, data in (("dead", dead), ("live", live), ("odd", odd)):
        (runtime / f"{name}.json").write_text(json.dumps(data))
    report = procs.sweep_orphans(runtime, wait=0)
    assert report.removed == (str(dead_profile),)
    assert not dead_profile.exists()
    assert live_profile.exists() and not_a_profile.exists()  # a live owner; not a profile name
    assert sorted(p.name for p in runtime.iterdir()) == ["live.json"]
