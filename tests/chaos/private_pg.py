"""A PostgreSQL cluster of a test's own (initdb, pg_ctl as the ``postgres`` user, its own port
and socket directory): what a test may stop, restart or starve without touching the shared
server."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

BIN = Path(sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1])


@contextmanager
def private_postgres(*settings: str) -> Iterator[str]:
    """Start a cluster (``settings``: ``name=value`` server settings); yields its URL."""
    user = pwd.getpwnam("postgres")
    root = Path(tempfile.mkdtemp(prefix="crawlfleet-pg-"))
    os.chown(root, user.pw_uid, user.pw_gid)
    data = root / "data"
    port = _free_port()
    options = " ".join(f"-c {s}" for s in (f"port={port}", f"unix_socket_directories={root}"))
    options += "".join(f" -c {s}" for s in settings)
    try:
        _as_postgres([str(BIN / "initdb"), "-A", "trust", "-U", "postgres", "-D", str(data)])
        _as_postgres(
            [str(BIN / "pg_ctl"), "-D", str(data), "-o", options, "-w", "-t", "60", "start"],
            log=root / "log",
        )
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        _as_postgres([str(BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], check=False)
        shutil.rmtree(root, ignore_errors=True)


def _as_postgres(args: Sequence[str], *, log: Path | None = None, check: bool = True) -> None:
    cmd = ["runuser", "-u", "postgres", "--", *args]
    if log is not None:
        cmd[-1:-1] = ["-l", str(log)]
    subprocess.run(cmd, check=check, capture_output=True, timeout=120, cwd="/")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
