"""The fetcher an ``auto`` spider's new request starts with, and the probes back over HTTP."""

from __future__ import annotations

import hashlib

import pytest

from crawlfleet.policy.fetchers import PROBE_EVERY, fetcher_for, probes_back

FPS = [hashlib.sha1(str(i).encode()).digest() for i in range(4096)]


def choose(needs: str | None, fp: bytes, *, spider: str = "auto", suspected: bool = False) -> str:
    return fetcher_for(spider, needs, suspected=suspected, fingerprint=fp)


@pytest.mark.parametrize("spider", ["http", "browser"])
def test_a_spider_that_is_not_auto_keeps_its_fetcher(spider: str) -> None:
    for needs in (None, "http", "browser"):
        assert {choose(needs, fp, spider=spider, suspected=True) for fp in FPS[:64]} == {spider}


def test_an_unjudged_type_starts_over_http_unless_suspected() -> None:
    assert {choose(None, fp) for fp in FPS} == {"auto"}
    assert {choose(None, fp, suspected=True) for fp in FPS} == {"browser"}


def test_a_type_judged_http_stays_http_first() -> None:
    assert {choose("http", fp) for fp in FPS} == {"auto"}
    assert {choose("http", fp, suspected=True) for fp in FPS} == {"auto"}  # judged beats guessed


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
