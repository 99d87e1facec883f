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
    assert base.for_spider({"fetch_timeout": 45, "DOWNLOAD_DELAY": 1}, "shop").fetch_timeout == 45
    with pytest.raises(ConfigError, match=r"^spider shop: lease_ttl"):
        base.for_spider({"fetch_timeout": 90}, "shop")
