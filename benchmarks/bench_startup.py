"""Start-up of the command line: import time of ``crawlfleet --help`` and the time from
``crawlfleet crawl`` starting to the first request reaching the site.

    .venv/bin/python benchmarks/bench_startup.py [--runs 5]

The site is a one-page HTTP server in this process (it notes when each request arrives); the
crawl runs in a fresh temporary directory with its embedded store, one worker, as a user's first
``crawlfleet crawl spider.py`` would. Prints the median and the best of each figure over
``--runs`` (the best is the steadier one on a machine shared with other work).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SPIDER = """\
from crawlfleet import Spider


class One(Spider):
    name = "one"
    start_urls = [{url!r}]

    def parse(self, response):
        yield {{"title": response.css("title::text").get()}}
"""


class Site(ThreadingHTTPServer):
    first_at: float | None = None


class Handler(BaseHTTPRequestHandler):
    server: Site

    def do_GET(self) -> None:
        if self.server.first_at is None:
            self.server.first_at = time.time()
        body = b"<html><title>one</title></html>" if self.path != "/robots.txt" else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def import_time() -> float:
    """Seconds ``import crawlfleet.cli`` (everything ``--help`` loads) takes, per -X importtime."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "crawlfleet", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    total = 0
    for line in out.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\s*)(\S+)", line)
        if m and not m.group(2):  # top-level imports only: their cumulative time
            total += int(m.group(1))
    return total / 1e6


def help_wall() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "crawlfleet", "--help"], capture_output=True, check=True)
    return time.perf_counter() - start


def first_request(workdir: Path) -> tuple[float, float]:
    """(seconds to the first request, seconds to exit) of one ``crawlfleet crawl``."""
    site = Site(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        spider = workdir / "one.py"
        spider.write_text(SPIDER.format(url=f"http://127.0.0.1:{site.server_port}/"))
        started = time.time()
        subprocess.run(
            [sys.executable, "-m", "crawlfleet", "crawl", str(spider)],
            cwd=workdir,
            capture_output=True,
            check=True,
        )
        ended = time.time()
        assert site.first_at is not None, "the crawl sent no request"
        return site.first_at - started, ended - started
    finally:
        site.shutdown()
        site.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    imports = [import_time() for _ in range(args.runs)]
    helps = [help_wall() for _ in range(args.runs)]
    firsts, walls = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            first, wall = first_request(Path(tmp))
            firsts.append(first)
            walls.append(wall)
    rows = [
        ("import (crawlfleet --help, -X importtime)", imports),
        ("crawlfleet --help wall", helps),
        ("crawl: start to first request", firsts),
        ("crawl: start to exit (one page)", walls),
    ]
    print(f"{'':42} {'median':>8} {'best':>8}")
    for label, values in rows:
        print(f"{label:42} {statistics.median(values):7.3f}s {min(values):7.3f}s")


if __name__ == "__main__":
    main()
