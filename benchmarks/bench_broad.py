"""A broad crawl: N small hosts on loopback, a few pages each, some dead, robots.txt quirks.

The hosts are ``tests/sites/broad.py`` (one process: loopback addresses 127.1.x.y, robots.txt
ok / 404 / 500 / slow / disallowing /private/, dead hosts in 127.2.x.y refusing connections).
Each run crawls them with ``crawlfleet crawl`` (SQLite or PostgreSQL, W workers) and prints:
time to the last page and to the end (process exit), home pages served after 5 s / 20 s,
pages/s per 5-second window, peak sockets and RSS per worker (from /proc).

The run ``scrapy`` crawls the same hosts with Scrapy and the settings of its "Broad Crawls"
page (downloader-aware priority queue, no cookies, no retries, no redirects, a 15 s download
timeout, robots.txt obeyed), at crawlfleet's concurrency (64) for a like-for-like figure. Scrapy
reads a robots.txt answering 5xx as "allow all", so it fetches the pages of those hosts that
crawlfleet (RFC 9309: complete disallow) does not: its page count is higher by them.

    python benchmarks/bench_broad.py --hosts 2000 --runs sqlite-1,sqlite-2,postgres-2,scrapy
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
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


def sample(pids: list[int]) -> tuple[int, int]:
    """(most sockets, most RSS kB) of one worker among ``pids`` now."""
    socks = rss = 0
    for pid in pids:
        n = 0
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss = max(rss, int(line.split()[1]))
        except OSError:
            continue
        socks = max(socks, n)
    return socks, rss


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


def finished_times(queue: str, workdir: Path) -> tuple[list[float], list[float]]:
    """finished_at of every done request, and of the done home pages (depth 0)."""
    sql = "SELECT finished_at, depth FROM requests WHERE state = 'done'"
    if queue.startswith("postgresql"):
        import psycopg

        with psycopg.connect(queue) as conn:
            rows = conn.execute(sql).fetchall()
    else:
        import sqlite3

        with sqlite3.connect(workdir / ".crawlfleet" / "queue.db") as db:
            rows = db.execute(sql).fetchall()
    return [r[0] for r in rows], [r[0] for r in rows if r[1] == 0]


def scrapy_times(workdir: Path) -> tuple[list[float], list[float]]:
    """The time of every page Scrapy parsed, and of the home pages (depth 0)."""
    path = workdir / "pages.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [r["t"] for r in rows], [r["t"] for r in rows if r["depth"] == 0]


def run(label: str, site: dict[str, Any], give_up: float) -> dict[str, Any]:
    backend, _, workers = label.partition("-")
    work = Path(tempfile.mkdtemp(prefix=f"broad-{label}-"))
    seeds = [f"http://{h}:{site['port']}/" for h in [*site["live"], *site["dead"]]]
    queue = "sqlite"
    if backend == "scrapy":
        (work / "broad.py").write_text(SCRAPY_SPIDER.format(start_urls=seeds))
        args = [sys.executable, "-m", "scrapy", "runspider", "broad.py"]
    else:
        (work / "broad.py").write_text(SPIDER.format(start_urls=seeds))
        (work / "crawlfleet.toml").write_text(TOML.format(give_up=give_up))
        if backend == "postgres":
            queue = pg_database(f"bench_broad_{os.getpid()}")
        args = [sys.executable, "-m", "crawlfleet", "crawl", "broad.py", "--workers", workers]
        if backend == "postgres":
            args += ["--queue", queue]
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}:{ROOT}")
    started = time.time()
    log = (work / "crawl.log").open("w")
    proc = subprocess.Popen(args, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    socks = rss = 0
    while proc.poll() is None:
        # one worker in the crawl's own process (no child), or Scrapy: that process is sampled
        workers_now = [] if backend == "scrapy" else children(proc.pid)
        s, r = sample(workers_now or [proc.pid])
        socks, rss = max(socks, s), max(rss, r)
        time.sleep(0.1)
    ended = time.time()
    log.close()
    done, homes = scrapy_times(work) if backend == "scrapy" else finished_times(queue, work)
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
        "homes": len(homes),
        "homes_after_5s": sum(1 for t in homes if t - started > 5),
        "homes_after_20s": sum(1 for t in homes if t - started > 20),
        "last_home_s": round(max(homes) - started, 1) if homes else None,
        "pages_per_s": round(len(done) / max(last - started, 1e-9)),
        "per_5s": [windows.get(i, 0) // 5 for i in range(max(windows, default=-1) + 1)],
        "peak_sockets_per_worker": socks,
        "peak_rss_mb_per_worker": round(rss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--dead", type=int, default=40)
    parser.add_argument("--slow", type=float, default=3.0)
    parser.add_argument("--robots-give-up", type=float, default=5.0)
    parser.add_argument("--runs", default="sqlite-1,sqlite-2,postgres-2")
    args = parser.parse_args()
    server, site = serve(args.hosts, args.dead, args.slow)
    try:
        for label in args.runs.split(","):
            print(json.dumps(run(label, site, args.robots_give_up)), flush=True)
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
