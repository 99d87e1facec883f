"""The worker's file descriptors: the soft limit raised to the hard one at start, as servers do.

A worker's sockets are bounded (``concurrency`` in use plus ``max_idle_connections`` idle, see
:mod:`crawlfleet.fetch.connector`), but its store, WARC files, DNS and robots.txt fetches need
some too. Under a soft ``ulimit -n`` of 1024 (a common default, with a far higher hard limit)
a busy worker could run out; past the hard limit nothing can be done but say so.
"""

from __future__ import annotations

import resource
from typing import Final

__all__ = ["HEADROOM", "needed", "raise_nofile"]

#: descriptors a worker needs besides its sockets: the store, WARC and raw files, DNS, pipes
HEADROOM: Final = 200


def needed(concurrency: int, max_idle: int) -> int:
    """Descriptors a worker with this concurrency may hold at once, with room to spare."""
    return concurrency + max_idle + HEADROOM


def raise_nofile(concurrency: int, max_idle: int) -> str | None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; a warning when even that is low for
    ``concurrency`` (None when it is enough)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    want = needed(concurrency, max_idle)
    if soft < want:
        return (
            f"open-file limit {soft} is low for concurrency {concurrency} (wants {want}): "
            "raise `ulimit -n` or lower [worker] concurrency; the worker backs off when it runs out"
        )
    return None
