"""Faults of the worker's own: a full WARC disk, a quota, no file descriptors left, a raw store
(object store) that does not answer.

They are the worker's failures, not the pages': an attempt that met one is given back unfetched
(it counts against no site, route or request), and the worker stops leasing, gives back every
lease it holds, raises the ``worker_local_fault`` alert and looks again every few seconds until
the machine has room and the raw store answers (:meth:`crawlfleet.worker.loops.Worker.run`;
the raw store's uploader notices it away and back: :class:`crawlfleet.data.rawstore.S3Store`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import Final

__all__ = ["LOCAL_ERRNOS", "PROBE_BYTES", "has_room", "local_fault"]

#: errors that say the machine is out of something, whatever the page
LOCAL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE})
#: bytes a probe writes (and syncs) in each WARC directory before the worker leases again
PROBE_BYTES: Final = 256 * 1024


def local_fault(exc: BaseException | None) -> OSError | None:
    """The local-resource error behind ``exc`` (itself, or what caused it), if there is one."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in LOCAL_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def has_room(directories: Iterable[Path], *, size: int = PROBE_BYTES) -> OSError | None:
    """Write and sync ``size`` bytes in each directory, then remove them: None when every one
    took them, else the error of the first that did not."""
    for directory in directories:
        probe = directory / f".crawlfleet-probe-{os.getpid()}"
        try:
            with open(probe, "wb") as handle:
                handle.write(b"\0" * size)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            return exc
        finally:
            with suppress(OSError):
                probe.unlink()
    return None
