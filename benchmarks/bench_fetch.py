"""Requests/s and client CPU per request of HttpClient on loopback keep-alive GETs.

The server is a minimal raw-asyncio HTTP/1.1 server in a subprocess (so its CPU is not counted),
answering every GET with a fixed body. The same load is also run through a bare aiohttp session
(auto-decompress off, no checks) to show what our layer adds on top of aiohttp.

    .venv/bin/python benchmarks/bench_fetch.py [--requests 20000] [--concurrency 64] [--size 45000]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, cast

import aiohttp

from crawlfleet.fetch import FetchSettings, HttpClient

try:
    import uvloop

    LOOP = "uvloop"
except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
    LOOP = "asyncio"


def serve(size: int) -> None:
    """Run the HTTP server forever; print its port on stdout."""
    body = b"x" * size
    response = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % size + body
    )

    class Protocol(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
            self.buffer = b""

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            # GETs without bodies: one response per header block received.
            count = self.buffer.count(b"\r\n\r\n")
            if count:
                self.buffer = self.buffer[self.buffer.rfind(b"\r\n\r\n") + 4 :]
                self.transport.write(response * count)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Protocol, "127.0.0.1", 0, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    run(main())


def run(coro: Coroutine[Any, Any, None]) -> None:
    if LOOP == "uvloop":
        uvloop.run(coro)
    else:
        asyncio.run(coro)


async def load(fetch: Callable[[], Awaitable[int]], requests: int, concurrency: int) -> None:
    remaining = requests

    async def loop() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await fetch()

    await asyncio.gather(*(loop() for _ in range(concurrency)))


async def measure(
    name: str, fetch: Callable[[], Awaitable[int]], requests: int, concurrency: int
) -> None:
    await load(fetch, min(2000, requests), concurrency)  # warm up the pool
    wall, cpu = time.perf_counter(), time.process_time()
    await load(fetch, requests, concurrency)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"{name:<22} {requests / wall:8.0f} req/s   {cpu / requests * 1e6:6.1f} µs CPU/req   "
        f"({requests} requests, concurrency {concurrency}, {wall:.2f} s)"
    )


async def bench(url: str, args: argparse.Namespace) -> None:
    settings = FetchSettings(
        concurrency=args.concurrency, private_ok_hosts=frozenset({"127.0.0.1"})
    )
    async with HttpClient(settings) as fetcher:

        async def ours() -> int:
            return len((await fetcher.fetch(url)).body)

        await measure("HttpClient", ours, args.requests, args.concurrency)

    connector = aiohttp.TCPConnector(limit=args.concurrency)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:

        async def bare() -> int:
            async with session.get(url) as resp:
                return len(await resp.read())

        await measure("bare aiohttp session", bare, args.requests, args.concurrency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--size", type=int, default=45_000)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.size)
        return
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--size", str(args.size)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        print(f"{args.size}-byte keep-alive GETs, loop: {LOOP}")
        run(bench(f"http://127.0.0.1:{port}/page", args))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
