"""``crawl``'s coordinator runs no worker and fetches nothing: what it imports must not load
the worker's loops or aiohttp (a second copy of the worker's start-up, 0.2 s of CPU a crawl)."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
from crawlfleet.config import Settings
import crawlfleet.cli.crawl, crawlfleet.local.runner, crawlfleet.notify.service
from crawlfleet.worker.ids import default_worker_id
Settings().check()
default_worker_id()
loaded = sorted(m for m in ("aiohttp", "crawlfleet.worker.loops", "crawlfleet.fetch.http")
                if m in sys.modules)
print(",".join(loaded))
"""


def test_the_coordinators_modules_load_neither_aiohttp_nor_the_worker() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


def test_the_fetch_packages_names_still_import() -> None:
    import crawlfleet.fetch as fetch
    from crawlfleet.fetch import BodyDecoder, HttpFetcher, RobotsCache
    from crawlfleet.fetch.http import HttpFetcher as direct

    assert HttpFetcher is direct
    assert {BodyDecoder.__name__, RobotsCache.__name__} == {"BodyDecoder", "RobotsCache"}
    for name in fetch.__all__:
        assert getattr(fetch, name) is not None
    try:
        fetch.nothing_here  # noqa: B018
    except AttributeError:
        pass
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def test_default_worker_id_is_the_loops_one() -> None:
    from crawlfleet.worker import ids, loops

    assert loops.default_worker_id is ids.default_worker_id
