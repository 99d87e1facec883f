"""The fetcher an ``auto`` spider's new request starts with, and the probes back over HTTP."""

from __future__ import annotations

import hashlib
import itertools

import pytest

from crawlfleet.policy.fetchers import (
    LADDER,
    PROBE_EVERY,
    PROBE_EVERY_MAX,
    climbs,
    fetcher_for,
    higher,
    probe_down_every,
    probes_back,
    probes_down,
    rung_above,
    rung_of,
)

FPS = [hashlib.sha1(str(i).encode()).digest() for i in range(4096)]


def choose(needs: str | None, fp: bytes, *, spider: str = "auto") -> str:
    return fetcher_for(spider, needs, fingerprint=fp)


@pytest.mark.parametrize("spider", ["http", "browser"])
def test_a_spider_that_is_not_auto_keeps_its_fetcher(spider: str) -> None:
    for needs in (None, "http", "browser"):
        assert {choose(needs, fp, spider=spider) for fp in FPS[:64]} == {spider}


def test_an_unjudged_type_starts_over_http() -> None:
    # even while a page of it is being judged in the browser: a guess pins nothing there (a
    # page fetched raw meanwhile waits for the judgement), so a type judged fine raw costs the
    # browser its one judged page, not every link of it found while the judgement was on
    assert {choose(None, fp) for fp in FPS} == {"auto"}


def test_a_type_judged_http_stays_http_first() -> None:
    assert {choose("http", fp) for fp in FPS} == {"auto"}


def test_one_in_probe_every_of_a_browser_type_probes_back_over_http() -> None:
    picks = [choose("browser", fp) for fp in FPS]
    probes = picks.count("auto")
    assert set(picks) == {"browser", "auto"}
    assert abs(probes / len(FPS) - 1 / PROBE_EVERY) < 0.015, probes
    # the same request probes (or not) wherever and whenever it is chosen: by its fingerprint
    assert [choose("browser", fp) for fp in FPS] == picks
    assert all((p == "auto") == probes_back(fp) for p, fp in zip(picks, FPS, strict=True))


def test_the_probe_share_follows_every() -> None:
    assert all(probes_back(fp, 1) for fp in FPS[:64])
    assert sum(probes_back(fp, 2) for fp in FPS) == pytest.approx(len(FPS) / 2, rel=0.1)
    assert sum(probes_back(fp, 256) for fp in FPS) < sum(probes_back(fp, 16) for fp in FPS)


# -- the ladder: http -> impersonate -> browser, per domain ----------------------------------


def on(domain_rung: str | None, needs: str | None, fp: bytes) -> str:
    return fetcher_for("auto", needs, fingerprint=fp, domain_rung=domain_rung)


def test_a_domain_raised_to_impersonate_starts_there_and_one_in_probe_every_probes_down() -> None:
    picks = [on("impersonate", None, fp) for fp in FPS]
    assert set(picks) == {"impersonate", "auto"}
    assert abs(picks.count("auto") / len(FPS) - 1 / PROBE_EVERY) < 0.015
    assert all((p == "auto") == probes_down(fp) for p, fp in zip(picks, FPS, strict=True))
    # the page type's need still wins: a browser type goes to the browser but for its probes
    # back, which go to the domain's rung (or below it, for a probe down)
    typed = [on("impersonate", "browser", fp) for fp in FPS]
    assert set(typed) == {"browser", "impersonate", "auto"}
    assert all((t == "browser") == (not probes_back(fp)) for t, fp in zip(typed, FPS, strict=True))


@pytest.mark.parametrize(
    ("blocked", "every"),
    [(-1, 16), (0, 16), (1, 32), (2, 64), (3, 128), (4, 256), (5, 256), (10**9, 256)],
)
def test_each_blocked_probe_down_in_a_row_halves_the_probe_share(blocked: int, every: int) -> None:
    assert probe_down_every(blocked) == every
    assert PROBE_EVERY <= probe_down_every(blocked) <= PROBE_EVERY_MAX


def test_a_rarer_probe_down_share_probes_a_subset_of_the_same_requests() -> None:
    def probes(down_every: int) -> set[int]:
        return {
            i
            for i, fp in enumerate(FPS)
            if fetcher_for(
                "auto", None, fingerprint=fp, domain_rung="impersonate",
                down_every=down_every,
            ) == "auto"
        }  # fmt: skip

    shares = [probes(probe_down_every(n)) for n in range(6)]
    assert all(later <= earlier for earlier, later in itertools.pairwise(shares))
    assert len(shares[0]) > 8 * len(shares[4]) > 0
    # the probes back of a browser type are untouched by the probe-down share
    backs = [on("impersonate", "browser", fp) != "browser" for fp in FPS]
    assert backs == [probes_back(fp) for fp in FPS]


def test_a_domain_raised_to_the_browser_sends_everything_there_but_its_probes() -> None:
    picks = [on("browser", "http", fp) for fp in FPS]
    assert set(picks) == {"browser", "impersonate"}  # the probe down is one rung down
    assert {on(None, "http", fp) for fp in FPS} == {on("http", "http", fp) for fp in FPS}


def test_the_two_probes_are_independent() -> None:
    both = sum(probes_back(fp) and probes_down(fp) for fp in FPS)
    assert both < sum(probes_back(fp) for fp in FPS) / 4


@pytest.mark.parametrize(
    ("reason", "climb"),
    [
        ("vendor:cloudflare", True),
        ("generic:captcha", True),
        ("status:403", True),
        ("structure:no-text", True),
        ("spider", True),
        ("status:429", False),  # load: pacing's, not the ladder's
        ("status:503", False),
        ("empty", False),
        ("structure:scripts-only", False),  # the page type's need, judged in the browser
        ("", False),
        (None, False),
    ],
)
def test_what_climbs(reason: str | None, climb: bool) -> None:
    assert climbs(reason) is climb


def test_the_rungs() -> None:
    assert [rung_of(f) for f in ("auto", None, "http", "impersonate", "browser")] == [
        "http",
        "http",
        "http",
        "impersonate",
        "browser",
    ]
    assert [rung_above(r) for r in LADDER] == ["impersonate", "browser", None]
    assert higher("impersonate", "http") == "impersonate" and higher(None, "browser") == "browser"
    assert higher("http", None) == "http" and higher(None, None) is None
