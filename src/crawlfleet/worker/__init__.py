"""The execution plane: a worker's loops and everything one attempt runs through.

``loops`` (the lease, report, heartbeat, upkeep and stats loops; :class:`Worker`), ``attempt``
(one leased request through its steps, one event per attempt), ``jobs`` (what a worker keeps open
per job), ``extract`` (what a page produces: records, quarantine, new links) and ``offloop`` (the
thread spider callbacks run in). Nothing here is public API; :class:`Worker` is importable from
this package, loaded on first use so that importing the package costs nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawlfleet.worker.loops import Worker

__all__ = ["Worker"]


def __getattr__(name: str) -> Any:
    if name != "Worker":
        raise AttributeError(f"module 'crawlfleet.worker' has no attribute {name!r}")
    return importlib.import_module("crawlfleet.worker.loops").Worker
