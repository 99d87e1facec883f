"""CPU a page: crawlfleet against the bare loop and Scrapy on the same static shop, plain HTTP
and TLS.

    .venv/bin/python benchmarks/bench_cpu.py [--products 5000] [--transports http,tls]
        [--runs bare,crawlfleet,scrapy] [--rounds 3] [--queue postgresql://...] [--src DIR]
    .venv/bin/python benchmarks/bench_cpu.py serve [--tls]     # the shop alone, until Ctrl-C

The shop of ``bench_crawl.py`` (``make_site.py``: 5,000 products, 25-45 KB pages) is served by
a throwaway nginx with its pages gzipped ahead (``gzip_static``: the server spends no CPU
compressing), over plain HTTP, and over TLS with a certificate of a throwaway CA (every crawler
trusts it through ``SSL_CERT_FILE``). Each crawl runs as a subprocess in a fresh directory
against a fresh nginx:

* ``bare``: ``bare_loop.py`` (aiohttp + selectolax/lexbor + a set of seen URLs, no store, no
  WARC): the least any crawler of this shop must spend;
* ``crawlfleet``: ``crawlfleet crawl shop_spider.py --workers 1 -o out.jsonl``, SQLite, WARC
  and records on, every default as it is;
* ``scrapy``: ``scrapy runspider scrapy_shop.py`` (64 in flight);
* ``crawlfleet-pg``: the same crawl with ``--queue`` (a schema of its own, dropped after);
* ``before``: the crawlfleet run with the source tree ``--src`` first on ``PYTHONPATH`` (a
  before/after comparison in one sitting).

Measured: the CPU seconds of the crawler's whole process tree (``wait4``: every process and
thread, counted by the kernel), split between the coordinator and its workers (the workers'
as the coordinator reaped them, from ``/proc``), divided by the requests nginx answered. For
``crawlfleet-pg`` also the PostgreSQL server's CPU: its backends serving the crawl's
connections (found by ``application_name``), read from ``/proc`` while they run (the server
must be on this machine). Every run's records are checked against the catalog.

CPU a page holds on a busy machine where pages/s does not; the ratio to the bare loop of the
same round (the runs of a round go one after the other) is the figure to compare. ``--rounds
N`` repeats every run and prints each round's ratios and their median.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

from bench_crawl import check_records  # noqa: E402
from make_site import ensure_gzipped, ensure_site  # noqa: E402
from nginx import start_nginx  # noqa: E402

from crawlfleet.demo.catalog import Catalog  # noqa: E402

OUT = HERE / "out"
TICKS = os.sysconf("SC_CLK_TCK")
PG_SERVER = os.environ.get("CRAWLFLEET_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
#: seconds between two looks at the process tree
SAMPLE_EVERY = 0.05


def commands(queue: str | None) -> dict[str, list[str]]:
    """Each run's command line; run with cwd = a fresh directory that receives ``out.jsonl``."""
    crawl = [sys.executable, "-m", "crawlfleet", "crawl", str(HERE / "shop_spider.py")]
    crawl += ["--workers", "1", "-o", "out.jsonl"]
    out = {
        "bare": [sys.executable, str(HERE / "bare_loop.py"), "-o", "out.jsonl"],
        "crawlfleet": crawl,
        "before": crawl,
        "scrapy": [
            *(sys.executable, "-m", "scrapy", "runspider", str(HERE / "scrapy_shop.py")),
            *("-O", "out.jsonl", "-s", "LOG_LEVEL=WARNING"),
        ],
    }
    if queue:
        out["crawlfleet-pg"] = [*crawl, "--queue", queue]
    return out


# -- the process tree, as the kernel counts it ----------------------------------------------------


@dataclass
class Proc:
    pid: int
    role: str
    cmdline: bytes = b""
    cpu: float = 0.0  # its own threads' CPU seconds, as last read
    reaped: float = 0.0  # CPU seconds of its children it has waited for, as last read
    threads: dict[int, float] = field(default_factory=dict)  # tid -> CPU seconds


def _stat(path: str) -> list[str] | None:
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    return text.rpartition(")")[2].split()  # fields from "state" on: comm may hold spaces


def _children(pid: int) -> list[int]:
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
        except OSError:
            continue
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _role(pid: int, root: int, cmdline: bytes) -> str:
    if pid == root:
        return "main"
    return "worker" if b"worker" in cmdline.split(b"\0") else "other"


class TreeWatch:
    """Reads the CPU of every process under ``root`` (and of each thread) every
    :data:`SAMPLE_EVERY` seconds until stopped; a process keeps its last reading once gone."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.procs: dict[int, Proc] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(SAMPLE_EVERY)

    def sample(self) -> None:
        todo = [self.root]
        while todo:
            pid = todo.pop()
            todo.extend(_children(pid))
            fields = _stat(f"/proc/{pid}/stat")
            if fields is None or fields[0] == "Z":
                continue
            proc = self.procs.get(pid)
            if proc is None:
                cmdline = _cmdline(pid)
                proc = self.procs[pid] = Proc(pid, _role(pid, self.root, cmdline), cmdline)
            elif proc.role == "other" and (cmdline := _cmdline(pid)):  # seen before its exec?
                proc.role, proc.cmdline = _role(pid, self.root, cmdline), cmdline
            # fields from "state": utime, stime, cutime, cstime are 11..14
            proc.cpu = (int(fields[11]) + int(fields[12])) / TICKS
            proc.reaped = (int(fields[13]) + int(fields[14])) / TICKS
            with contextlib.suppress(OSError):
                for tid in os.listdir(f"/proc/{pid}/task"):
                    t = _stat(f"/proc/{pid}/task/{tid}/stat")
                    if t is not None:
                        proc.threads[int(tid)] = (int(t[11]) + int(t[12])) / TICKS

    def split(self, total: float) -> dict[str, float]:
        """``total`` (the tree's CPU, exact) split by role: the workers' from the larger of
        their own last readings and what the main process had reaped of them; the main
        process gets the rest."""
        workers = [p for p in self.procs.values() if p.role == "worker"]
        others = sum(p.cpu for p in self.procs.values() if p.role == "other")
        main = self.procs.get(self.root)
        worker = max(sum(p.cpu for p in workers), (main.reaped - others) if main else 0.0)
        if not workers:
            worker = 0.0
        return {"main": max(0.0, total - worker - others), "worker": worker, "other": others}

    def worker_threads(self) -> list[float]:
        """CPU seconds of each thread of the workers, largest first."""
        return sorted(
            (c for p in self.procs.values() if p.role == "worker" for c in p.threads.values()),
            reverse=True,
        )


# -- the PostgreSQL server's side ---------------------------------------------------------------


class ServerWatch:
    """CPU of the PostgreSQL backends whose ``application_name`` is ``name``, read from /proc
    every :data:`SAMPLE_EVERY` seconds (a backend keeps its last reading once it is gone)."""

    def __init__(self, server: str, name: str) -> None:
        self.server, self.name = server, name
        self.cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ServerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.server, autocommit=True) as conn:
            query = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            while True:
                pids = [r[0] for r in conn.execute(query, (self.name,)).fetchall()]
                for pid in pids:
                    fields = _stat(f"/proc/{pid}/stat")
                    if fields is not None:
                        self.cpu[pid] = (int(fields[11]) + int(fields[12])) / TICKS
                if self._stop.wait(SAMPLE_EVERY):
                    return

    @property
    def total(self) -> float:
        return sum(self.cpu.values())


def pg_queue(server: str, tag: str) -> tuple[str, str]:
    """A queue URL of its own schema on ``server``, and the application name it connects as."""
    name = f"bench_cpu_{os.getpid()}_{tag}"
    sep = "&" if "?" in server else "?"
    return f"{server}{sep}schema={name}&application_name={name}", name


def drop_schema(server: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- one run --------------------------------------------------------------------------------------


@dataclass
class Run:
    name: str
    transport: str
    round: int
    ok: bool = False
    error: str = ""
    pages: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    split: dict[str, float] = field(default_factory=dict)
    threads: list[float] = field(default_factory=list)
    server_cpu_s: float | None = None
    records: int = 0
    records_check: str = ""

    @property
    def complete(self) -> bool:
        return self.ok and self.records_check == "ok"

    def ms_per_page(self, cpu: float | None = None) -> float:
        return 1000 * (self.cpu_s if cpu is None else cpu) / self.pages if self.pages else 0.0


@dataclass
class Site:
    root: Path
    expected: list[dict[str, Any]]
    ca: Any = None  # tests.tls.LocalCA for TLS


@contextlib.contextmanager
def serving(site: Site, transport: str, log: Path | None) -> Iterator[tuple[str, dict[str, str]]]:
    """nginx serving the shop over ``transport``; yields its base URL and the environment the
    crawlers need."""
    tls = (site.ca.cert_file, site.ca.key_file) if transport == "tls" else None
    base, stop = start_nginx(site.root, access_log=log, gzip=True, tls=tls)
    env = {"BENCH_SITE_URL": base + "/"}
    if transport == "tls":
        env["SSL_CERT_FILE"] = str(site.ca.ca_file)
    try:
        yield base, env
    finally:
        stop()


def run_one(
    name: str, argv: list[str], site: Site, transport: str, rnd: int, args: argparse.Namespace
) -> Run:
    run = Run(name, transport, rnd)
    work = Path(tempfile.mkdtemp(prefix=f"bench-cpu-{name}-"))
    log = work / "access.log"
    schema = None
    env_extra = python_path(args.src if name == "before" else None)
    if name == "crawlfleet-pg":
        queue, schema = pg_queue(args.queue, f"{transport}_{rnd}")
        argv = [*argv[:-1], queue]
    with serving(site, transport, log) as (_, env):
        env = os.environ | env | env_extra | {"PYTHONUNBUFFERED": "1"}
        with (
            open(work / "stdout.log", "wb") as out,
            open(work / "stderr.log", "wb") as err,
            ServerWatch(args.queue, schema) if schema else contextlib.nullcontext() as server,
        ):
            started = time.perf_counter()
            proc = subprocess.Popen(
                argv, cwd=work, env=env, stdout=out, stderr=err, start_new_session=True
            )
            with TreeWatch(proc.pid) as tree:
                status, usage = _wait(proc, args.timeout)
            run.wall_s = time.perf_counter() - started
            if server is not None:
                run.server_cpu_s = server.total
    run.cpu_s = usage.ru_utime + usage.ru_stime
    run.split = tree.split(run.cpu_s)
    run.threads = tree.worker_threads()
    run.pages = _served(log)
    if status is None:
        run.error = f"timed out after {args.timeout:.0f}s"
    elif status != 0:
        tail = (work / "stderr.log").read_text(errors="replace").strip().splitlines()[-10:]
        run.error = f"exit code {status}: " + "\n    ".join(tail)
    else:
        run.ok = True
    run.records, run.records_check = check_records(work / "out.jsonl", site.expected)
    if schema:
        drop_schema(args.queue, schema)
    if run.complete and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        run.error += f" (kept: {work})"
    return run


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int | None, Any]:
    """Wait for ``proc``; its exit status (None: killed at ``timeout``) and its tree's rusage."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            return None, usage
        time.sleep(0.02)


def _served(log: Path) -> int:
    """Requests nginx answered (its access log, flushed when it stopped)."""
    if not log.exists():
        return 0
    with open(log, "rb") as f:
        return sum(1 for _ in f)


# -- the report ----------------------------------------------------------------------------------


def print_runs(runs: list[Run]) -> None:
    print(
        f"{'transport':<9} {'round':>5} {'run':<14} {'pages':>6} {'wall s':>7} {'CPU s':>7} "
        f"{'ms/page':>8} {'main':>6} {'worker':>7} {'server':>7}  threads (worker, ms/page)"
    )
    for r in runs:
        split = {k: r.ms_per_page(v) for k, v in r.split.items()}
        server = "      -"
        if r.server_cpu_s is not None:
            server = f"{r.ms_per_page(r.server_cpu_s):7.3f}"
        threads = " ".join(f"{r.ms_per_page(t):.2f}" for t in r.threads[:5] if t > 0)
        status = "" if r.complete else f"  {'FAILED' if not r.ok else 'RECORDS'}: {r.error}"
        print(
            f"{r.transport:<9} {r.round:>5} {r.name:<14} {r.pages:>6} {r.wall_s:>7.1f} "
            f"{r.cpu_s:>7.2f} {r.ms_per_page():>8.3f} {split.get('main', 0):>6.3f} "
            f"{split.get('worker', 0):>7.3f} {server}  {threads}{status}"
        )
        if r.complete and r.records_check != "ok":
            print(f"    records: {r.records_check}")


def ratios(runs: list[Run]) -> dict[str, dict[str, list[float]]]:
    """Per transport and run name: its CPU a page over the bare loop's, round by round."""
    out: dict[str, dict[str, list[float]]] = {}
    by = {(r.transport, r.round, r.name): r for r in runs if r.complete}
    for (transport, rnd, name), r in sorted(by.items()):
        bare = by.get((transport, rnd, "bare"))
        if name == "bare" or bare is None or not bare.ms_per_page():
            continue
        out.setdefault(transport, {}).setdefault(name, []).append(
            r.ms_per_page() / bare.ms_per_page()
        )
    return out


def print_ratios(runs: list[Run]) -> None:
    for transport, by_name in ratios(runs).items():
        for name, values in by_name.items():
            each = ", ".join(f"{v:.2f}" for v in values)
            print(
                f"{transport}: {name} / bare CPU a page: {statistics.median(values):.2f}x "
                f"(rounds: {each})"
            )
    by = {(r.transport, r.round, r.name): r for r in runs if r.complete}
    for (transport, rnd, name), r in sorted(by.items()):
        other = by.get((transport, rnd, "before"))
        if name == "crawlfleet" and other is not None and other.ms_per_page():
            print(
                f"{transport} round {rnd}: crawlfleet / before CPU a page "
                f"{r.ms_per_page() / other.ms_per_page():.3f}"
            )


# -- the commands ---------------------------------------------------------------------------------


def python_path(first: str | None = None) -> dict[str, str]:
    """The crawlers' ``PYTHONPATH``: the crawlfleet tree this script imported (``first``
    before it), then this one's entries, all absolute. The runs start in a directory of their
    own, where a relative entry (``PYTHONPATH=src``) finds nothing and crawlfleet would come
    from wherever the interpreter installed it instead."""
    path = [str(Path(e).resolve()) for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    path.insert(0, str(_crawlfleet_tree()))
    if first:
        path.insert(0, str(Path(first).resolve()))
    return {"PYTHONPATH": os.pathsep.join(path)}


def _crawlfleet_tree() -> Path:
    """The source tree (``src``) of the crawlfleet this script imported."""
    import crawlfleet

    return Path(crawlfleet.__file__).resolve().parent.parent


def compile_sources(*trees: str | Path | None) -> None:
    """Write the bytecode caches of crawlfleet's source trees, as installing a package does.

    A crawl started from a source tree under ``PYTHONDONTWRITEBYTECODE`` (set in some
    environments) compiles its ~125 modules again in every process it starts: 0.25 s of CPU a
    process, which no installed crawlfleet spends and the bare loop (a few modules) hardly
    pays. ``compileall`` writes them once (it ignores that variable); every run then reads them.
    """
    import compileall

    dirs = {_crawlfleet_tree() / "crawlfleet"}
    dirs |= {Path(t).resolve() / "crawlfleet" for t in trees if t}
    for d in sorted(dirs):
        if d.is_dir():
            compileall.compile_dir(d, quiet=1, workers=1)
    compileall.compile_dir(HERE, quiet=1, maxlevels=0)


def prepare(products: int, tls: bool, src: str | None = None) -> Site:
    compile_sources(src)
    root = OUT / f"site-{products}"
    info = ensure_site(root, products)
    gz = ensure_gzipped(root)
    print(
        f"site: {root} ({info['pages']} pages, {info['bytes'] / info['pages'] / 1e3:.1f} KB a "
        f"page, {gz / info['pages'] / 1e3:.1f} KB gzipped); {os.cpu_count()} CPUs",
        flush=True,
    )
    site = Site(root, Catalog(n_products=products).expected_records())
    if tls:
        from tests.tls import make_ca

        site.ca = make_ca(Path(tempfile.mkdtemp(prefix="bench-cpu-ca-")))
    return site


def serve(args: argparse.Namespace) -> int:
    """The shop alone, until interrupted: for timing crawls by hand."""
    transport = "tls" if args.tls else "http"
    site = prepare(args.products, args.tls)
    with serving(site, transport, None) as (_, env):
        print(" ".join(f"{k}={v}" for k, v in env.items()), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--products", type=int, default=5000)
    if argv[:1] == ["serve"]:
        p.add_argument("--tls", action="store_true")
        args = p.parse_args(argv[1:])
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        return serve(args)
    p.add_argument("--transports", default="http,tls", help="http, tls or both (default)")
    p.add_argument("--runs", default="bare,crawlfleet,scrapy")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument(
        "--queue",
        nargs="?",
        const=PG_SERVER,
        default=None,
        help=f"add a crawlfleet-pg run on this PostgreSQL server (default {PG_SERVER})",
    )
    p.add_argument("--src", help="another source tree: adds a 'before' run from it")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    p.add_argument("--keep", action="store_true", help="keep every run's directory")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.runs.split(",") if n.strip()]
    if args.queue and "crawlfleet-pg" not in names:
        names.append("crawlfleet-pg")
    if args.src and "before" not in names:
        names.insert(names.index("crawlfleet") if "crawlfleet" in names else 0, "before")
    known = commands(args.queue)
    if unknown := [n for n in names if n not in known]:
        p.error(f"unknown runs: {', '.join(unknown)} (known: {', '.join(known)})")
    transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    site = prepare(args.products, "tls" in transports, args.src)
    runs: list[Run] = []
    for rnd in range(1, args.rounds + 1):
        for transport in transports:
            for name in names:
                print(f"round {rnd} {transport} {name}", file=sys.stderr, flush=True)
                runs.append(run_one(name, known[name], site, transport, rnd, args))
    print()
    print_runs(runs)
    print()
    print_ratios(runs)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    OUT.mkdir(exist_ok=True)
    report = OUT / f"cpu-{stamp}.json"
    report.write_text(json.dumps([asdict(r) | {"ms_per_page": r.ms_per_page()} for r in runs]))
    print(f"\nresults: {report}")
    return 0 if all(r.complete for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
