"""The ``[browser]`` section: a worker's Chromium pool from crawlfleet.toml, flags and ``-s``."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlfleet.config import Settings, load_settings
from crawlfleet.errors import ConfigError
from crawlfleet.fetch.browser import BrowserSettings
from crawlfleet.worker.jobs import browser_settings


def test_the_defaults_are_the_pool_s() -> None:
    pool, default = browser_settings(Settings()), BrowserSettings()
    for name in ("executable", "contexts", "pages_per_context", "pages_per_browser"):
        assert getattr(pool, name) == getattr(default, name)
    assert pool.memory_budget == default.memory_budget == 2 << 30


def test_the_file_then_overrides_set_the_worker_s_pool(tmp_path: Path) -> None:
    config = tmp_path / "crawlfleet.toml"
    config.write_text(
        "[browser]\ncontexts = 2\npages_per_context = 20\npages_per_browser = 500\n"
        'memory_budget = 1073741824\nexecutable = "/usr/bin/chromium"\n'
    )
    pool = browser_settings(load_settings(str(config)))
    assert (pool.contexts, pool.pages_per_context, pool.pages_per_browser) == (2, 20, 500)
    assert pool.memory_budget == 1 << 30
    # -s KEY=VALUE and a spider's overrides: dotted or bare names, strings converted
    s = load_settings(str(config), {"contexts": "8", "browser.memory_budget": "805_306_368"})
    assert (browser_settings(s).contexts, browser_settings(s).memory_budget) == (8, 768 << 20)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[browser]\ncontexts = 0\n", "contexts, pages_per_context and pages_per_browser"),
        ("[browser]\nmemory_budget = 2048\n", "memory_budget is in bytes"),
        ('[browser]\ncontexts = "four"\n', "must be an integer"),
        ("[browser]\ncontext = 4\n", "did you mean 'browser.contexts'"),
    ],
)
def test_bad_values_are_one_line_errors(tmp_path: Path, text: str, error: str) -> None:
    config = tmp_path / "crawlfleet.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=error) as caught:
        load_settings(str(config))
    assert "\n" not in str(caught.value)
