"""Settings: defaults < crawlfleet.toml < environment < flags, and refusals in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlfleet.config import Settings, load_settings
from crawlfleet.config.custom_settings import for_spider
from crawlfleet.errors import ConfigError


def test_load_settings__file_then_environment_then_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "crawlfleet.toml"
    config.write_text(
        'queue = "sqlite:///a.db"\n[worker]\nconcurrency = 7\nlease_ttl = 90\n'
        '[domains."shop.test"]\nconcurrency = 2\nrate = 4\n'
    )
    monkeypatch.setenv("CRAWLFLEET_CONCURRENCY", "9")
    settings = load_settings(config, {"lease_ttl": 120})
    assert settings.queue == "sqlite:///a.db"
    assert settings.concurrency == 9
    assert settings.lease_ttl == 120
    limits = settings.domains["shop.test"]
    assert (limits.max_in_flight, limits.min_delay) == (2, 0.25)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bogus = 1\n", "unknown key 'bogus'"),
        ("[worker]\nspeed = 3\n", "unknown key worker.speed"),
        ("[worker]\nconcurrency = 'many'\n", "worker.concurrency must be an integer, not 'many'"),
        ("[worker\n", "cannot read"),
    ],
)
def test_load_settings__bad_file_is_one_clear_error(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "crawlfleet.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(config)


def test_check__refuses_a_lease_shorter_than_the_fetch_timeout() -> None:
    with pytest.raises(ConfigError, match="lease_ttl"):
        Settings.of(lease_ttl=10, fetch_timeout=30).check()


def test_for_spider__a_spider_cannot_outlast_its_lease_through_custom_settings() -> None:
    base = Settings.of(lease_ttl=60, fetch_timeout=30)
    assert for_spider(base, {"fetch_timeout": 45, "DOWNLOAD_DELAY": 1}, "shop").fetch_timeout == 45
    with pytest.raises(ConfigError, match=r"^spider shop: lease_ttl"):
        for_spider(base, {"fetch_timeout": 90}, "shop")


def test_pacing__the_documented_keys_load_and_bad_values_are_one_clear_error(
    tmp_path: Path,
) -> None:
    config = tmp_path / "crawlfleet.toml"
    config.write_text(
        "[pacing]\nmax_delay = 30.0\nslowdown_factor = 3.0\nrecover_factor = 0.9\n"
        "recover_every = 10\nlimit_fraction = 0.5\nlimit_hold = 60.0\ncrawl_delay_cap = 5.0\n"
        "circuit_threshold = 3\nrobots_recheck = 2.0\npushback_share = 0.3\n"
    )
    pacing = load_settings(config).pacing_config()
    assert (pacing.max_delay, pacing.recover_every, pacing.pushback_share) == (30.0, 10, 0.3)
    config.write_text("[pacing]\nrecover_factor = 1.5\n")
    with pytest.raises(ConfigError, match=r"\[pacing\]: recover_factor must be in \(0, 1\)"):
        load_settings(config).check()


# -- typed sections ---------------------------------------------------------------------------


def test_settings__sections_hold_typed_values_and_the_shorthands_read_them(tmp_path: Path) -> None:
    config = tmp_path / "crawlfleet.toml"
    config.write_text(
        "[store]\nraw = 'warc-here'\n[worker]\nfetch_timeout = 5\nuser_agent = 'me/1'\n"
        "[retry]\nbase = 1\n[pacing]\nmax_delay = 7\nrobots_recheck = 3\n"
        "[traps]\nmax_depth = false\nhost_page_budget = 9\n[control]\nport = 9999\n"
    )
    s = load_settings(config)
    assert (s.store.raw, s.raw) == ("warc-here", "warc-here")
    assert s.worker.fetch_timeout == 5.0 and isinstance(s.worker.fetch_timeout, float)
    assert (s.user_agent, s.retry_base, s.robots_recheck) == ("me/1", 1.0, 3.0)
    assert s.pacing_config().max_delay == 7.0
    assert (s.trap_rules().max_depth, s.trap_rules().host_page_budget) == (None, 9)
    assert s.control.port == 9999


def test_trap_defaults__are_the_documented_ones() -> None:
    rules = Settings().trap_rules()
    # no URL-shape budget by default: a catalogue of 12,000 products of one shape is not a trap
    assert (rules.max_depth, rules.host_page_budget, rules.pattern_budget) == (50, 100_000, None)
    assert (rules.max_url_length, rules.max_repeated_segments) == (2083, 2)
    assert rules.max_links_per_page == 10_000


def test_spider_trap_attributes__left_as_they_are_take_traps__none_is_no_limit(
    tmp_path: Path,
) -> None:
    from crawlfleet import Spider
    from crawlfleet.worker.extract import trap_rules

    config = tmp_path / "crawlfleet.toml"
    config.write_text("[traps]\npattern_budget = 40\nhost_page_budget = 9\nmax_depth = 3\n")
    s = load_settings(config)

    class Plain(Spider):
        name = "plain"

    class Unbounded(Spider):
        name = "unbounded"
        pattern_budget = None
        host_page_budget = None
        max_depth = 7
        max_url_length = None  # a guard that always holds: None keeps the setting
        max_repeated_segments = None

    plain, unbounded = trap_rules(Plain, s), trap_rules(Unbounded, s)
    assert (plain.pattern_budget, plain.host_page_budget, plain.max_depth) == (40, 9, 3)
    assert (unbounded.pattern_budget, unbounded.host_page_budget, unbounded.max_depth) == (
        None,
        None,
        7,
    )
    assert (unbounded.max_url_length, unbounded.max_repeated_segments) == (2083, 2)
    # without settings: the guards' own defaults, and None still no limit
    assert trap_rules(Unbounded).pattern_budget is None
    assert trap_rules(Plain).max_url_length == 2083
    # a spider's own attribute wins over the section
    assert Settings().trap_rules(max_depth=3, pattern_budget=None).max_depth == 3
    assert Settings().trap_rules(max_links_per_page=50).max_links_per_page == 50
    assert Settings.of(max_links_per_page="false").trap_rules().max_links_per_page is None


def test_robots_give_up__documented_default__bad_values_are_one_clear_error() -> None:
    assert Settings().robots_give_up == 120.0
    assert (Settings().host_recheck, Settings().host_give_up) == (2.5, 10.0)
    assert Settings.of(robots_give_up="5").check().robots_give_up == 5.0
    with pytest.raises(ConfigError, match="robots_give_up must be 0 seconds or more"):
        Settings.of(robots_give_up=-1).check()
    with pytest.raises(ConfigError, match="max_links_per_page must be at least 1"):
        Settings.of(max_links_per_page=0).check()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[workers]\nconcurrency = 2\n",
            r"unknown section \[workers\] \(did you mean 'worker'\?\)",
        ),
        (
            "[worker]\nconcurency = 2\n",
            r"unknown key worker.concurency \(did you mean 'worker.concurrency'",
        ),
        ("[pacing]\nmax_dely = 2\n", r"did you mean 'pacing.max_delay'"),
        ("[pacing]\nmin_delay = 2\n", r"unknown key pacing.min_delay"),  # per domain, not here
        ("[traps]\nmax_depth = 'deep'\n", r"traps.max_depth must be an integer \(or false"),
        ("queu = 'x'\n", r"unknown key 'queu' \(did you mean 'queue'\?\)"),
        ("[domains.'a.test']\nrates = 2\n", r"unknown key domains.'a.test'.rates"),
        ("[routes]\n[[routes.pool]]\nname = 'x'\n", r"routes.pool\[0\] \(x\): no proxies"),
        ("[[routes.pool]]\nname = 'p'\nproxy = 'http://a:1'\n", r"routes.pool\[0\]"),
    ],
)
def test_load_settings__unknown_names_and_bad_values_name_the_nearest_known_one(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "crawlfleet.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(config)


def test_settings__every_repr_masks_passwords_and_tokens(tmp_path: Path) -> None:
    config = tmp_path / "crawlfleet.toml"
    config.write_text(
        "queue = 'postgresql://crawl:hunter2@db/crawl'\n[control]\ntoken = 's3cret-token'\n"
        "[[routes.pool]]\nname = 'dc'\nproxies = ['http://user:pr0xypass@10.0.0.1:3128']\n"
    )
    s = load_settings(config)
    shown = repr(s) + str(s) + repr(s.control) + repr(s.routes)
    for secret in ("hunter2", "s3cret-token", "pr0xypass"):
        assert secret not in shown
    assert "crawl:[secure]@db" in shown and "'[secure]'" in repr(s.control)
    assert s.queue.endswith("hunter2@db/crawl")  # the value itself is intact
    assert s.routes.pools is not None and s.routes.pools.names == ["direct", "dc"]


def test_with_overrides__strings_are_converted_dotted_and_bare_keys_both_work() -> None:
    s = Settings.of(**{"worker.concurrency": "8", "lease_ttl": "90", "traps.max_depth": "off"})
    assert (s.concurrency, s.lease_ttl, s.traps.max_depth) == (8, 90.0, None)
    assert Settings.of(**{"pacing.max_delay": "2.5"}).pacing.max_delay == 2.5
    with pytest.raises(ConfigError, match=r"unknown setting 'concurency' \(did you mean"):
        Settings.of(concurency="3")
    with pytest.raises(ConfigError, match=r"worker\.concurrency must be an integer, not 'many'"):
        Settings.of(**{"worker.concurrency": "many"})


def test_for_spider__maps_scrapy_names_and_refuses_what_has_no_equivalent() -> None:
    base = Settings()
    s = for_spider(
        base, {"DOWNLOAD_TIMEOUT": 12, "USER_AGENT": "bot/2", "CONCURRENT_REQUESTS": 16}, "shop"
    )
    assert (s.fetch_timeout, s.user_agent, s.concurrency) == (12.0, "bot/2", 16)
    with pytest.raises(ConfigError, match=r"^spider shop: Scrapy setting AUTOTHROTTLE_ENABLED"):
        for_spider(base, {"AUTOTHROTTLE_ENABLED": True}, "shop")
    with pytest.raises(
        ConfigError, match=r"unknown Scrapy setting DOWNLOAD_DELAYS .*DOWNLOAD_DELAY"
    ):
        for_spider(base, {"DOWNLOAD_DELAYS": 1}, "shop")
    with pytest.raises(ConfigError, match=r"pacing.max_delay is a fleet-wide setting"):
        for_spider(base, {"pacing.max_delay": 3}, "shop")
    with pytest.raises(ConfigError, match="unknown setting 'fetch_timout'"):
        for_spider(base, {"fetch_timout": 3}, "shop")


def test_cache_memory__bytes_from_file_and_flags_and_at_least_one_mib(tmp_path: Path) -> None:
    cfg = tmp_path / "crawlfleet.toml"
    cfg.write_text("[worker]\ncache_memory = 16777216\n")
    assert load_settings(cfg).worker.cache_memory == 16 << 20
    assert Settings.of(cache_memory="8_388_608").worker.cache_memory == 8 << 20
    assert Settings().worker.cache_memory == 64 << 20
    with pytest.raises(ConfigError, match=r"cache_memory must be at least 1048576 bytes"):
        Settings.of(**{"worker.cache_memory": 1000}).check()


def test_worker_limits_on_spider_output__the_documented_defaults() -> None:
    # README, [worker]: max_yields_per_page = 100000, parse_timeout = 30.0
    worker = Settings().worker
    assert worker.max_yields_per_page == 100_000
    assert worker.parse_timeout == 30.0
