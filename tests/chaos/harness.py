"""The chaos harness: a queue store per test on either backend, worker processes, their signals.

Every test here gets its own store: a SQLite file in the test's directory, or a PostgreSQL schema
of its own (``…/test?schema=chaos_<hex>``) dropped at the end. Tests read the store with plain
SQL (``Store.rows``), so what they assert is what is on disk, not what a process believes.
"""

from __future__ import annotations

import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tests.conftest import PG_DSN

CRAWLFLEET = [sys.executable, "-m", "crawlfleet"]
#: runs ``crawlfleet`` with fetches of marked URLs delayed (see tests/chaos/slow_worker.py)
SLOW_CRAWLFLEET = [sys.executable, "-m", "tests.chaos.slow_worker"]
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Store:
    """One test's queue store: its URL for ``--queue`` and a way to read it with SQL."""

    backend: str
    url: str
    path: Path | None = None  # SQLite file
    schema: str | None = None  # PostgreSQL schema

    def rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run ``query`` (``?`` placeholders) on a fresh connection; returns every row."""
        if self.path is not None:
            if not self.path.exists():
                return []
            with suppress(sqlite3.OperationalError), _sqlite(self.path) as db:
                return [tuple(r) for r in db.execute(query, params).fetchall()]
            return []  # tables not created yet
        import psycopg

        with psycopg.connect(_server_dsn(), autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{self.schema}"')
            try:
                cur = conn.execute(query.replace("?", "%s"), params)  # type: ignore[arg-type]
            except psycopg.errors.UndefinedTable:
                return []
            return [tuple(r) for r in cur.fetchall()]

    def value(self, query: str, params: Sequence[Any] = ()) -> Any:
        rows = self.rows(query, params)
        return rows[0][0] if rows else None

    def empty(self) -> None:
        """Delete every row but the schema version (PostgreSQL: faster than a new schema)."""
        import psycopg

        assert self.schema is not None
        with psycopg.connect(_server_dsn(), autocommit=True) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s"
                " AND tablename <> 'crawlfleet_meta' ORDER BY tablename = 'jobs', tablename",
                (self.schema,),
            ).fetchall()
            with conn.transaction():
                for (table,) in tables:
                    conn.execute(f'DELETE FROM "{self.schema}"."{table}"')

    def unlocked(self) -> bool:
        """True if no other process holds a lock in the store right now: SQLite's write lock,
        or a PostgreSQL row lock on a request or domain (this test's schema only)."""
        if self.path is not None:
            db = sqlite3.connect(self.path, timeout=0.5, isolation_level=None)
            try:
                db.execute("BEGIN IMMEDIATE")
                db.execute("ROLLBACK")
                return True
            except sqlite3.OperationalError:
                return False
            finally:
                db.close()
        import psycopg

        with psycopg.connect(_server_dsn()) as conn:
            conn.execute(f'SET search_path TO "{self.schema}"')
            try:
                conn.execute("SELECT id FROM requests FOR UPDATE NOWAIT")
                conn.execute("SELECT domain FROM domains FOR UPDATE NOWAIT")
            except psycopg.errors.LockNotAvailable:
                return False
            finally:
                conn.rollback()
        return True

    def drop(self) -> None:
        if self.schema is None:
            return
        import psycopg

        with psycopg.connect(_server_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


@contextmanager
def _sqlite(path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(path, timeout=30)
    try:
        yield db
    finally:
        db.close()


def _server_dsn() -> str:
    return PG_DSN


@contextmanager
def new_store(backend: str, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store for one test (PostgreSQL: a schema of its own, dropped after)."""
    if backend == "sqlite":
        path = tmp_path / "store" / "queue.db"
        yield Store(backend, f"sqlite:///{path}", path=path)
        return
    schema = f"chaos_{secrets.token_hex(5)}"
    parts = urlsplit(_server_dsn())
    url = urlunsplit(parts._replace(query=f"schema={schema}"))
    store = Store(backend, url, schema=schema)
    try:
        yield store
    finally:
        store.drop()


# -- processes ------------------------------------------------------------------------------------


def start(
    args: Sequence[str], cwd: Path, *, slow: bool = False, **env: str
) -> subprocess.Popen[str]:
    """Start ``crawlfleet ARGS`` (or the slow-fetch variant); stderr is kept for the asserts."""
    return subprocess.Popen(
        [*(SLOW_CRAWLFLEET if slow else CRAWLFLEET), *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(env),
    )


def run(args: Sequence[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CRAWLFLEET, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env({}),
        stdin=subprocess.DEVNULL,
    )


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ, **extra)
    # the slow-fetch driver lives in tests/: let every child import it
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def worker_args(store: Store, job: str, *extra: str) -> list[str]:
    return ["worker", "--queue", store.url, "--job", job, "--exit-when-finished", *extra]


def finish(proc: subprocess.Popen[str], timeout: float) -> str:
    """Wait for ``proc`` to exit; returns its stderr. Kills it if it overstays."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"{proc.args} did not exit in {timeout}s:\n{err[-3000:]}") from None
    return err


@contextmanager
def reaped(*procs: subprocess.Popen[str]) -> Iterator[list[subprocess.Popen[str]]]:
    """Make sure every process started in the block is gone when it ends (SIGCONT, SIGKILL)."""
    group = list(procs)
    try:
        yield group
    finally:
        for proc in group:
            if proc.poll() is None:
                with suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)
                    proc.kill()
            with suppress(Exception):
                proc.communicate(timeout=10)


def pause_outside_transaction(proc: subprocess.Popen[str], store: Store) -> None:
    """SIGSTOP ``proc`` at a moment it holds no lock in the store.

    A process stopped inside a store transaction keeps its locks (PostgreSQL row locks, SQLite's
    write lock) until it runs again, so nobody could take its work over meanwhile; the tests
    about takeover stop it between transactions.
    """
    for _ in range(100):
        proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: _state(proc.pid) == "T", 5, "the process to stop")
        if store.unlocked():
            return
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.02)
    raise AssertionError("the process was inside a store transaction at every try")


def _state(pid: int) -> str:
    """The process state letter from /proc (R, S, T for stopped, Z, ...)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``predicate`` until it returns something truthy; returns that value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def write_config(cwd: Path, **worker: Any) -> None:
    lines = ["[worker]"] + [f"{k} = {v!r}" for k, v in worker.items()]
    (cwd / "crawlfleet.toml").write_text("\n".join(lines) + "\n")


def spider_file(path: Path, base: str, body: str = "", **attrs: Any) -> Path:
    """A demo-shop spider pointed at ``base``; ``attrs`` become class attributes, ``body`` is
    extra class source (indented by the caller)."""
    extra = "".join(f"    {k} = {v!r}\n" for k, v in attrs.items())
    path.write_text(
        "import os\n\n"
        "from crawlfleet.demo.spider import DemoShop\n\n\n"
        "class Shop(DemoShop):\n"
        f"    start_urls = [{base + '/'!r}]\n" + extra + body
    )
    return path


def exported_records(queue: str, job: str, cwd: Path) -> list[dict[str, Any]]:
    """Every record of ``job`` as ``crawlfleet export --provenance`` writes it (``_warc_file``,
    ``_warc_record_id``...), through ``cwd/records.jsonl``."""
    import json

    out = cwd / "records.jsonl"
    exported = run(["export", "--queue", queue, "--job", job, "--provenance", "-o", str(out)], cwd)
    assert exported.returncode == 0, exported.stderr
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def warc_record_ids(warc: bytes | Path, types: Collection[str] = ()) -> Counter[str]:
    """How often each WARC-Record-ID appears in a WARC file (its bytes or its path), counting
    only the records of ``types`` (``response``, ``revisit``...) if given."""
    from warcio.archiveiterator import ArchiveIterator

    data = warc if isinstance(warc, bytes) else warc.read_bytes()
    return Counter(
        record.rec_headers.get_header("WARC-Record-ID")
        for record in ArchiveIterator(BytesIO(data))
        if not types or record.rec_type in types
    )
