"""A worker's default id, importable without the worker itself (the coordinator of ``crawl``
names itself by it and never runs a worker's loops)."""

from __future__ import annotations

import os
import socket


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"
