"""A broad crawl: N small hosts on loopback, a few pages each, some dead, robots.txt quirks.

The hosts are ``tests/sites/broad.py`` (one process: loopback addresses 127.1.x.y, robots.txt
ok / 404 / 500 / slow / disallowing /private/, dead hosts in 127.2.x.y refusing connections).
Each run crawls them with ``crawlfleet crawl`` (SQLite or PostgreSQL, W workers) and prints:
time to the last page and to the end (process exit), home pages served after 5 s / 20 s,
pages/s per 5-second window, peak sockets and RSS per worker (from /proc).

    python benchmarks/bench_broad.py --hosts 2000 --dead 40 --runs sqlite-1,sqlite-2,postgres-2
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


def run(label: str, site: dict[str, Any], give_up: float) -> dict[str, Any]:
    backend, workers = label.split("-")
    work = Path(tempfile.mkdtemp(prefix=f"broad-{label}-"))
    seeds = [f"http://{h}:{site['port']}/" for h in [*site["live"], *site["dead"]]]
    (work / "broad.py").write_text(SPIDER.format(start_urls=seeds))
    (work / "crawlfleet.toml").write_text(TOML.format(give_up=give_up))
    queue = pg_database(f"bench_broad_{os.getpid()}") if backend == "postgres" else "sqlite"
    args = [sys.executable, "-m", "crawlfleet", "crawl", "broad.py", "--workers", workers]
    if backend == "postgres":
        args += ["--queue", queue]
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}:{ROOT}")
    started = time.time()
    log = (work / "crawl.log").open("w")
    proc = subprocess.Popen(args, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    socks = rss = 0
    while proc.poll() is None:
        # one worker runs in the crawl's own process (no child): then that process is sampled
        s, r = sample(children(proc.pid) or [proc.pid])
        socks, rss = max(socks, s), max(rss, r)
        time.sleep(0.1)
    ended = time.time()
    log.close()
    done, homes = finished_times(queue, work)
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
