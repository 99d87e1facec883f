"""Discovery-heavy crawls: pages/s and worker memory as a crawl finds URLs, against link-light ones.

    .venv/bin/python benchmarks/bench_discovery.py [--backends sqlite,postgres] [--workers 1,2]
        [--seconds 45] [--urls 1000000] [--sites discovery,known,shop] [--src OTHER/src]

For each backend and worker count, three crawls of ``--seconds`` each (workers started with
``crawlfleet worker``, default settings, after ``crawlfleet submit``), each against a fresh
server and a fresh store:

* ``discovery``: ``discovery_site.py``, every page links K=50 pages no other page links (every
  link new), stopped after ``--seconds`` or ``--urls`` discovered URLs, whichever comes first;
* ``known``: the same site with ``--known`` (the same pages, 49 of their 50 links known);
* ``shop``: the demo shop (``--products``), the link-light crawl: its links are menus, pagers
  and products linked from several pages.

Every ``--sample`` seconds it prints the URLs the store holds, pages the server answered, pages/s
since the last sample and each worker's RSS. At the end a table: pages/s (whole run, and over
its second half), peak and last RSS of the biggest worker, worker CPU ms per page, the store's
size and bytes per queued request, and the ratios discovery/shop and discovery/known.

PostgreSQL from ``CRAWLFLEET_BENCH_PG`` (a schema per run, dropped afterwards). ``--src`` runs the
workers from another source tree (a before/after comparison in one sitting); ``--cache-memory``
sets the workers' ``[worker] cache_memory``; ``--repeat N`` runs every crawl N times, in rounds,
and gives the ratios of each round and their median (the machine's noise is ±10% a run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawlfleet.fetch.browser import procs

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PG_SERVER = os.environ.get("CRAWLFLEET_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Sample:
    t: float
    urls: int
    pages: int
    rss_mb: list[float]


@dataclass
class Run:
    site: str
    backend: str
    workers: int
    samples: list[Sample] = field(default_factory=list)
    cpu_s: float = 0.0
    store_bytes: int = 0
    queued: int = 0

    def pages_per_s(self, since: float = 0.0) -> float:
        s = [x for x in self.samples if x.t >= since] or self.samples
        first, last = s[0], self.samples[-1]
        if last.t <= first.t:
            return 0.0
        return (last.pages - first.pages) / (last.t - first.t)

    @property
    def half(self) -> float:
        return self.pages_per_s(self.samples[-1].t / 2)

    @property
    def peak_rss(self) -> float:
        return max(max(s.rss_mb, default=0.0) for s in self.samples)

    @property
    def last_rss(self) -> float:
        return max(self.samples[-1].rss_mb, default=0.0)


def start_server(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, line.split()[2]


def served(base: str, site: str) -> int:
    path = "/__admin/stats" if site == "shop" else "/stats"
    with urllib.request.urlopen(base + path, timeout=10) as r:
        data: Any = json.load(r)
    if site == "shop":
        return int(data["requests"])
    return int(data)


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE_SIZE / 1e6
    except OSError:
        return 0.0


def cpu_s(pid: int) -> float:
    proc = procs.read_proc(pid)  # None once it has exited: the caller keeps its last reading
    return proc.cpu if proc is not None else 0.0


class Store:
    """The run's queue store: a SQLite file in the run's directory or a PostgreSQL schema."""

    def __init__(self, backend: str, tmp: Path, tag: str) -> None:
        self.backend = backend
        self.path = tmp / "queue.db"
        self.schema = f"bench_disc_{os.getpid()}_{tag}"
        if backend == "sqlite":
            self.url = f"sqlite:///{self.path}"
        else:
            sep = "&" if "?" in PG_SERVER else "?"
            self.url = f"{PG_SERVER}{sep}schema={self.schema}"
        self._pg: Any = None

    def _query(self, sql: str) -> Any:
        if self.backend == "sqlite":
            if not self.path.exists():
                return None
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5)
            try:
                return db.execute(sql).fetchone()[0]
            except sqlite3.OperationalError:
                return None
            finally:
                db.close()
        import psycopg

        if self._pg is None:
            self._pg = psycopg.connect(PG_SERVER, autocommit=True)
        try:
            table = f'"{self.schema}".requests'
            return self._pg.execute(sql.replace("requests", table)).fetchone()[0]
        except psycopg.Error:
            return None

    def urls(self) -> int:
        return int(self._query("SELECT coalesce(max(id), 0) FROM requests") or 0)

    def queued(self) -> int:
        return int(self._query("SELECT count(*) FROM requests WHERE state = 'queued'") or 0)

    def size(self) -> int:
        if self.backend == "sqlite":
            return sum(p.stat().st_size for p in self.path.parent.glob("queue.db*"))
        import psycopg

        q = (
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'"
        )
        with psycopg.connect(PG_SERVER, autocommit=True) as conn:
            return int(conn.execute(q, (self.schema,)).fetchone()[0])  # type: ignore[index]

    def drop(self) -> None:
        if self._pg is not None:
            self._pg.close()
            self._pg = None
        if self.backend == "postgres":
            import psycopg

            with psycopg.connect(PG_SERVER, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


def crawl(site: str, backend: str, workers: int, args: argparse.Namespace) -> Run:
    if site == "shop":
        server_args = ["-m", "crawlfleet.demo.server", "--port", "0"]
        server_args += ["--products", str(args.products)]
        spider = HERE / "shop_spider.py"
    else:
        server_args = [str(HERE / "discovery_site.py"), "--links", str(args.links)]
        server_args += ["--known"] if site == "known" else []
        spider = HERE / "discovery_spider.py"
    server, base = start_server(server_args)
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-{site}-"))
    store = Store(backend, tmp, f"{site}_{workers}")
    if args.cache_memory:
        (tmp / "crawlfleet.toml").write_text(f"[worker]\ncache_memory = {args.cache_memory}\n")
    env = {**os.environ, "BENCH_SITE_URL": base + "/"}
    if args.src:
        env["PYTHONPATH"] = os.pathsep.join([args.src, env.get("PYTHONPATH", "")])
    cli = [sys.executable, "-m", "crawlfleet"]
    run = Run(site, backend, workers)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        subprocess.run(
            [*cli, "submit", str(spider), "--queue", store.url],
            cwd=tmp,
            env=env,
            check=True,
            capture_output=True,
        )
        for i in range(workers):
            procs.append(
                subprocess.Popen(
                    [*cli, "-q", "worker", "--queue", store.url, "--worker-id", f"w{i}"]
                    + (["--exit-when-finished"] if site == "shop" else []),
                    cwd=tmp,
                    env=env,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        t0 = time.monotonic()
        last = (0.0, 0)
        cpu = [0.0] * len(procs)
        while True:
            time.sleep(args.sample)
            t = time.monotonic() - t0
            sample = Sample(t, store.urls(), served(base, site), [rss_mb(p.pid) for p in procs])
            # each worker's CPU as of this sample: a worker that finished keeps its last reading
            cpu = [max(c, cpu_s(p.pid)) for c, p in zip(cpu, procs, strict=True)]
            run.samples.append(sample)
            rate = (sample.pages - last[1]) / (t - last[0])
            last = (t, sample.pages)
            rss = " ".join(f"{r:6.0f}" for r in sample.rss_mb)
            print(
                f"  {site:9} {backend:8} w={workers} t={t:5.0f}s urls={sample.urls:>9,} "
                f"pages={sample.pages:>7,} {rate:6.0f} pages/s  rss MB: {rss}",
                file=sys.stderr,
                flush=True,
            )
            done = all(p.poll() is not None for p in procs)
            if done or t >= args.seconds or sample.urls >= args.urls:
                break
        run.cpu_s = sum(max(c, cpu_s(p.pid)) for c, p in zip(cpu, procs, strict=True))
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        run.queued = store.queued()
        run.store_bytes = store.size()
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()
        store.drop()
        shutil.rmtree(tmp, ignore_errors=True)
    return run


def report(runs: list[Run]) -> None:
    print(
        "| site | backend | workers | URLs | pages | pages/s | 2nd half | peak RSS MB | "
        "last RSS MB | CPU ms/page | store MB | B/queued |"
    )
    print("|" + "---|" * 12)
    for r in runs:
        pages = r.samples[-1].pages
        per = r.store_bytes / r.samples[-1].urls if r.samples[-1].urls else 0
        print(
            f"| {r.site} | {r.backend} | {r.workers} | {r.samples[-1].urls:,} | {pages:,} | "
            f"{r.pages_per_s():.0f} | {r.half:.0f} | {r.peak_rss:.0f} | {r.last_rss:.0f} | "
            f"{1000 * r.cpu_s / max(pages, 1):.2f} | {r.store_bytes / 1e6:.0f} | {per:.0f} |"
        )
    # the ratios of each round (runs of one round ran one after the other), then their median
    by: dict[tuple[str, str, int], list[Run]] = {}
    for r in runs:
        by.setdefault((r.site, r.backend, r.workers), []).append(r)
    for (site, backend, workers), rs in by.items():
        if site != "discovery":
            continue
        for other in ("shop", "known"):
            pairs = [
                (r, o)
                for r, o in zip(rs, by.get((other, backend, workers), []), strict=False)
                if o.pages_per_s() and o.cpu_s and r.samples[-1].pages
            ]
            if not pairs:
                continue
            speed = [r.pages_per_s() / o.pages_per_s() for r, o in pairs]
            cpu = [
                (r.cpu_s / r.samples[-1].pages) / (o.cpu_s / o.samples[-1].pages) for r, o in pairs
            ]
            each = ", ".join(f"{c:.2f}" for c in cpu)
            print(
                f"discovery/{other} {backend} w={workers}: pages/s {statistics.median(speed):.2f}, "
                f"worker CPU per page {statistics.median(cpu):.2f}x"
                + (f" (median of {len(pairs)} rounds: {each})" if len(pairs) > 1 else "")
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--workers", default="1,2")
    p.add_argument("--sites", default="discovery,known,shop")
    p.add_argument("--seconds", type=float, default=45.0, help="longest crawl of a run")
    p.add_argument("--urls", type=int, default=1_000_000, help="stop a run at this many URLs")
    p.add_argument("--sample", type=float, default=3.0, help="seconds between samples")
    p.add_argument("--links", type=int, default=50, help="links per page of the generator site")
    p.add_argument("--products", type=int, default=20_000, help="products of the demo shop")
    p.add_argument("--src", help="run the workers from this source tree")
    p.add_argument("--cache-memory", type=int, help="[worker] cache_memory of the workers (bytes)")
    p.add_argument("--json", help="write the samples to this file")
    p.add_argument("--repeat", type=int, default=1, help="rounds of every run (ratios: median)")
    args = p.parse_args()
    runs = []
    for _ in range(args.repeat):  # rounds: each site's runs of a round one after the other
        for backend in args.backends.split(","):
            for workers in (int(w) for w in args.workers.split(",")):
                for site in args.sites.split(","):
                    runs.append(crawl(site, backend, workers, args))
    report(runs)
    if args.json:
        Path(args.json).write_text(
            json.dumps([{**r.__dict__, "samples": [s.__dict__ for s in r.samples]} for r in runs])
        )


if __name__ == "__main__":
    main()
