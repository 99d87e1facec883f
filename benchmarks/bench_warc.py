"""WARC writing cost: crawlfleet's WarcWriter against warcio's WARCWriter(gzip=True), same pages.

    .venv/bin/python benchmarks/bench_warc.py [--records 3000] [--size 45000] [--level 1]

Prints, for each writer, responses/s end to end (until the file is closed; each response also
writes its request record) and the calling thread's cost per ``write``: wall time (includes
waiting when the writer's queue is full) and CPU time of that thread.

The saturated runs write as fast as they can, so our writer's wall time there is mostly
back-pressure. The paced run (``--rate``) writes like a worker at that many pages/s and shows
the cost the event loop really pays: the calling thread is the worker's event loop, so its cost
limits pages/s, while our writer compresses on another core.
"""

from __future__ import annotations

import argparse
import io
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawlfleet.data.warc import WarcWriter

VOCABULARY = (
    "price cart product shipping review blue red large small cotton steel garden kitchen "
    "delivery stock offer brand model colour size warranty return gift sale new"
)
WORDS = VOCABULARY.split()

REQUEST_HEADERS = [
    ("Host", "shop.example"),
    ("User-Agent", "crawlfleet/0.1 (+https://example.org/bot)"),
    ("Accept", "text/html,application/xhtml+xml"),
    ("Accept-Encoding", "gzip, br"),
    ("Cookie", "session=abcdef0123456789"),
]
RESPONSE_HEADERS = [
    ("Date", "Wed, 01 May 2024 12:00:00 GMT"),
    ("Content-Type", "text/html; charset=utf-8"),
    ("Content-Encoding", "gzip"),
    ("Cache-Control", "max-age=60"),
    ("Server", "nginx"),
    ("Vary", "Accept-Encoding"),
]


def make_pages(count: int, size: int, seed: int = 7) -> list[bytes]:
    """HTML-like pages of about ``size`` bytes that compress like real ones (about 5-8x)."""
    rng = random.Random(seed)
    pages = []
    for n in range(count):
        parts = [f"<html><head><title>Page {n}</title></head><body><ul>"]
        length = len(parts[0])
        while length < size:
            words = " ".join(rng.choices(WORDS, k=rng.randint(3, 9)))
            item = f'<li class="p"><a href="/item/{rng.randint(1, 10**6)}">{words}</a></li>\n'
            parts.append(item)
            length += len(item)
        pages.append("".join(parts).encode()[:size])
    return pages


def bench(
    name: str,
    pages: list[bytes],
    write: Callable[[int, bytes], None],
    done: Callable[[], None],
    rate: float = 0.0,
) -> None:
    """Time ``write`` per page; with ``rate``, pace writes like a worker at that many pages/s."""
    wall = cpu = 0.0
    start = time.perf_counter()
    for n, body in enumerate(pages):
        if rate:
            time.sleep(max(0.0, start + n / rate - time.perf_counter()))
        t0, c0 = time.perf_counter(), time.thread_time()
        write(n, body)
        wall += time.perf_counter() - t0
        cpu += time.thread_time() - c0
    done()
    total = time.perf_counter() - start
    count = len(pages)
    print(
        f"{name:<42} {count / total:>9,.0f} responses/s   caller per write: "
        f"{wall / count * 1e6:>7.1f} µs wall, {cpu / count * 1e6:>7.1f} µs CPU"
    )


def bench_crawlfleet(
    pages: list[bytes], directory: Path, level: int, fsync: bool, rate: float = 0.0
) -> None:
    writer = WarcWriter(directory, prefix=f"bench-l{level}", gzip_level=level, fsync=fsync)

    def write(n: int, body: bytes) -> None:
        writer.write(
            url=f"https://shop.example/item/{n}",
            method="GET",
            request_headers=REQUEST_HEADERS,
            status=200,
            reason="OK",
            http_version="HTTP/1.1",
            response_headers=RESPONSE_HEADERS,
            body=body,
            fetched_at=time.time(),
            ip="192.0.2.1",
        )

    def done() -> None:
        writer.flush()
        writer.close()

    label = f"crawlfleet WarcWriter (level {level})" + (f" @{rate:.0f}/s" if rate else "")
    bench(label, pages, write, done, rate)


def bench_warcio(pages: list[bytes], directory: Path) -> None:
    with open(directory / "warcio.warc.gz", "wb") as out:
        writer = WARCWriter(out, gzip=True)

        def write(n: int, body: bytes) -> None:
            url = f"https://shop.example/item/{n}"
            http = StatusAndHeaders("200 OK", RESPONSE_HEADERS, protocol="HTTP/1.1")
            response = writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), http_headers=http
            )
            req = StatusAndHeaders(f"GET /item/{n} HTTP/1.1", REQUEST_HEADERS, is_http_request=True)
            request = writer.create_warc_record(
                url, "request", payload=io.BytesIO(b""), http_headers=req
            )
            writer.write_request_response_pair(request, response)

        bench("warcio WARCWriter(gzip=True)", pages, write, out.flush)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--size", type=int, default=45_000)
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--rate", type=float, default=1000.0, help="paced run: pages/s")
    parser.add_argument("--no-fsync", action="store_true")
    args = parser.parse_args()
    pages = make_pages(args.records, args.size)
    print(f"{args.records} responses of {args.size:,} bytes\n")
    with tempfile.TemporaryDirectory() as tmp:
        bench_crawlfleet(pages, Path(tmp), args.level, not args.no_fsync)
        bench_crawlfleet(pages, Path(tmp), 6, not args.no_fsync)
        bench_crawlfleet(pages, Path(tmp), args.level, not args.no_fsync, args.rate)
        bench_warcio(pages[: max(args.records // 4, 1)], Path(tmp))
        for path in sorted(Path(tmp).iterdir()):
            print(f"  {path.name}: {path.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
