"""Settings: defaults < crawlfleet.toml < environment < flags, and refusals in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlfleet.config import Settings, load_settings
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
        ("[worker]\nconcurrency = 'many'\n", "is not a int"),
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
        Settings(lease_ttl=10, fetch_timeout=30).check()


def test_for_spider__a_spider_cannot_outlast_its_lease_through_custom_settings() -> None:
    base = Settings(lease_ttl=60, fetch_timeout=30)
    assert base.for_spider({"fetch_timeout": 45, "DOWNLOAD_DELAY": 1}, "shop").fetch_timeout == 45
    with pytest.raises(ConfigError, match=r"^spider shop: lease_ttl"):
        base.for_spider({"fetch_timeout": 90}, "shop")


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
