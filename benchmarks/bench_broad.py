"""A broad crawl: N small hosts on loopback, a few pages each, some dead, robots.txt quirks.

The hosts are ``tests/sites/broad.py`` (one process: loopback addresses 127.1.x.y, robots.txt
ok / 404 / 500 / slow / disallowing /private/, dead hosts in 127.2.x.y refusing connections).
Each run crawls them with ``crawlfleet crawl`` (SQLite or PostgreSQL, W workers) and prints:
time to the last page and to the end (process exit), when the last request ended dead (a dead
host's give-up, a robots.txt given up), home pages served after 5 s / 20 s, pages/s per 5-second
window, peak file descriptors, sockets and RSS per worker (from /proc). A last line compares
the runs: PostgreSQL's time to the last page over SQLite's with as many workers (``pg_vs_sqlite``),
and one worker's.

The run ``scrapy`` crawls the same hosts with Scrapy and the settings of its "Broad Crawls"
page (downloader-aware priority queue, no cookies, no retries, no redirects, a 15 s download
timeout, robots.txt obeyed), at crawlfleet's concurrency (64) for a like-for-like figure (a
page's time: when its callback ran). Scrapy reads a robots.txt answering 5xx as "allow all", so
it fetches the pages of those hosts that crawlfleet (RFC 9309: complete disallow) does not: its
page count is higher by them.

    python benchmarks/bench_broad.py --hosts 2000 --dead 40 \
        --runs sqlite-1,sqlite-2,postgres-2,scrapy
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PG_SERVER = os.environ.get("BENCH_PG", "postgresql://127.0.0.1:5432/test")
SPIDER = """
from crawlfleet import Spider


class Broad(Spider):
    name = "broad"
    start_urls = {start_urls!r}

    def parse(self, response):
        yield from response.follow_all("a")
"""
SCRAPY_SPIDER = """
import time

import scrapy


class Broad(scrapy.Spider):
    name = "broad"
    start_urls = {start_urls!r}
    custom_settings = {{
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
        "CONCURRENT_REQUESTS": 64,
        "REACTOR_THREADPOOL_MAXSIZE": 20,
        "LOG_LEVEL": "INFO",
        "COOKIES_ENABLED": False,
        "RETRY_ENABLED": False,
        "DOWNLOAD_TIMEOUT": 15,
        "REDIRECT_ENABLED": False,
        "AJAXCRAWL_ENABLED": True,
        "ROBOTSTXT_OBEY": True,
        "TELNETCONSOLE_ENABLED": False,
        "FEEDS": {{"pages.jsonl": {{"format": "jsonlines"}}}},
    }}

    def parse(self, response):
        yield {{"t": time.time(), "depth": response.meta.get("depth", 0)}}
        yield from response.follow_all(css="a")
"""
TOML = """[pacing]
robots_give_up = {give_up}
robots_recheck = 5
"""
#: ``--host-give-up``: a dead host's requests end dead(host_unreachable) after this
HOST_TOML = """host_give_up = {host_give_up}
"""


def serve(hosts: int, dead: int, slow: float) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.sites.broad"),
            *("--hosts", str(hosts), "--dead", str(dead), "--slow", str(slow)),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def sample(pids: list[int]) -> tuple[int, int, int]:
    """(most fds, most sockets, most RSS kB) of one worker among ``pids`` now."""
    fds = socks = rss = 0
    for pid in pids:
        n = 0
        try:
            names = os.listdir(f"/proc/{pid}/fd")
            fds = max(fds, len(names))
            for fd in names:
                with contextlib.suppress(OSError):
                    n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss = max(rss, int(line.split()[1]))
        except OSError:
            continue
        socks = max(socks, n)
    return fds, socks, rss


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def pg_database(name: str) -> str:
    import psycopg

    with psycopg.connect(PG_SERVER, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    return PG_SERVER.rsplit("/", 1)[0] + "/" + name


def finished_times(queue: str, workdir: Path) -> tuple[list[float], list[float], list[float]]:
    """finished_at of every done request, of the done home pages (depth 0), of the dead ones."""
    sql = "SELECT finished_at, depth, state FROM requests WHERE state IN ('done', 'dead')"
    if queue.startswith("postgresql"):
        import psycopg

        with psycopg.connect(queue) as conn:
            rows = conn.execute(sql).fetchall()
    else:
        import sqlite3

        with sqlite3.connect(workdir / ".crawlfleet" / "queue.db") as db:
            rows = db.execute(sql).fetchall()
    done = [r for r in rows if r[2] == "done"]
    dead = [r[0] for r in rows if r[2] == "dead" and r[0] is not None]
    return [r[0] for r in done], [r[0] for r in done if r[1] == 0], dead


def run(
    label: str, site: dict[str, Any], give_up: float, host_give_up: float | None
) -> dict[str, Any]:
    if label == "scrapy":
        return run_scrapy(site)
    backend, workers = label.split("-")
    work = Path(tempfile.mkdtemp(prefix=f"broad-{label}-"))
    seeds = [f"http://{h}:{site['port']}/" for h in [*site["live"], *site["dead"]]]
    (work / "broad.py").write_text(SPIDER.format(start_urls=seeds))
    toml = TOML.format(give_up=give_up)
    if host_give_up is not None:
        toml += HOST_TOML.format(host_give_up=host_give_up)
    (work / "crawlfleet.toml").write_text(toml)
    queue = pg_database(f"bench_broad_{os.getpid()}") if backend == "postgres" else "sqlite"
    args = [sys.executable, "-m", "crawlfleet", "crawl", "broad.py", "--workers", workers]
    if backend == "postgres":
        args += ["--queue", queue]
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}:{ROOT}")
    started = time.time()
    log = (work / "crawl.log").open("w")
    proc = subprocess.Popen(args, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    fds = socks = rss = 0
    while proc.poll() is None:
        # one worker runs in the crawl's own process (no child): then that process is sampled
        f, s, r = sample(children(proc.pid) or [proc.pid])
        fds, socks, rss = max(fds, f), max(socks, s), max(rss, r)
        time.sleep(0.1)
    ended = time.time()
    log.close()
    done, homes, dead = finished_times(queue, work)
    last = max(done) if done else started
    windows: dict[int, int] = {}
    for t in done:
        windows[int((t - started) // 5)] = windows.get(int((t - started) // 5), 0) + 1
    shutil.rmtree(work, ignore_errors=True)
    return {
        "run": label,
        "exit": proc.returncode,
        "pages": len(done),
        "last_page_s": round(last - started, 1),
        "end_s": round(ended - started, 1),
        "end_after_last_s": round(ended - last, 1),
        "dead": len(dead),
        "last_dead_s": round(max(dead) - started, 1) if dead else None,
        "homes": len(homes),
        "homes_after_5s": sum(1 for t in homes if t - started > 5),
        "homes_after_20s": sum(1 for t in homes if t - started > 20),
        "last_home_s": round(max(homes) - started, 1) if homes else None,
        "pages_per_s": round(len(done) / max(last - started, 1e-9)),
        "per_5s": [windows.get(i, 0) // 5 for i in range(max(windows, default=-1) + 1)],
        "peak_fds_per_worker": fds,
        "peak_sockets_per_worker": socks,
        "peak_rss_mb_per_worker": round(rss / 1024),
    }


def run_scrapy(site: dict[str, Any]) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="broad-scrapy-"))
    seeds = [f"http://{h}:{site['port']}/" for h in [*site["live"], *site["dead"]]]
    (work / "broad.py").write_text(SCRAPY_SPIDER.format(start_urls=seeds))
    args = [sys.executable, "-m", "scrapy", "runspider", "broad.py"]  # FEEDS: pages.jsonl
    started = time.time()
    log = (work / "scrapy.log").open("w")
    proc = subprocess.Popen(args, cwd=work, stdout=log, stderr=subprocess.STDOUT)
    fds = socks = rss = 0
    while proc.poll() is None:
        f, s, r = sample([proc.pid])
        fds, socks, rss = max(fds, f), max(socks, s), max(rss, r)
        time.sleep(0.1)
    ended = time.time()
    log.close()
    rows = [json.loads(line) for line in (work / "pages.jsonl").read_text().splitlines()]
    done = [r["t"] for r in rows]
    last = max(done) if done else started
    shutil.rmtree(work, ignore_errors=True)
    return {
        "run": "scrapy",
        "exit": proc.returncode,
        "pages": len(done),
        "last_page_s": round(last - started, 1),
        "end_s": round(ended - started, 1),
        "end_after_last_s": round(ended - last, 1),
        "last_home_s": round(max(r["t"] for r in rows if r["depth"] == 0) - started, 1)
        if rows
        else None,
        "pages_per_s": round(len(done) / max(last - started, 1e-9)),
        "peak_fds_per_worker": fds,
        "peak_sockets_per_worker": socks,
        "peak_rss_mb_per_worker": round(rss / 1024),
    }


def compare(last: dict[str, list[float]]) -> dict[str, Any]:
    """PostgreSQL's time to the last page over SQLite's with as many workers (the median of
    each label's runs), and over one SQLite worker's; one SQLite worker's over Scrapy's."""
    median = {label: statistics.median(times) for label, times in last.items()}
    ratios: dict[str, Any] = {}
    for label, seconds in median.items():
        backend, _, workers = label.partition("-")
        if backend != "postgres":
            continue
        if f"sqlite-{workers}" in median:
            ratios[f"pg_vs_sqlite_w{workers}"] = round(seconds / median[f"sqlite-{workers}"], 2)
        if workers != "1" and "sqlite-1" in median:
            ratios[f"pg_w{workers}_vs_sqlite_w1"] = round(seconds / median["sqlite-1"], 2)
    if "scrapy" in median and "sqlite-1" in median:
        ratios["sqlite_w1_vs_scrapy"] = round(median["sqlite-1"] / median["scrapy"], 2)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--dead", type=int, default=40)
    parser.add_argument("--slow", type=float, default=3.0)
    parser.add_argument("--robots-give-up", type=float, default=5.0)
    parser.add_argument(
        "--host-give-up", type=float, default=None, help="[pacing] host_give_up (default: 30)"
    )
    parser.add_argument("--runs", default="sqlite-1,sqlite-2,postgres-2")
    args = parser.parse_args()
    server, site = serve(args.hosts, args.dead, args.slow)
    try:
        last: dict[str, list[float]] = {}
        for label in args.runs.split(","):
            result = run(label, site, args.robots_give_up, args.host_give_up)
            last.setdefault(label, []).append(result["last_page_s"])
            print(json.dumps(result), flush=True)
        print(json.dumps(compare(last)), flush=True)
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
