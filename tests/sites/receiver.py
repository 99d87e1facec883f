"""A webhook receiver for the tests, a real aiohttp server on a loopback port: it checks each
body's signature (401 when it does not match), fails its first answers on purpose (503), can
hold a request open (to kill its sender mid-delivery), be taken down and brought back on the
same port, and keeps every body it accepted, by Idempotency-Key."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from crawlfleet.notify.signing import SIGNATURE_HEADER, verify


@dataclass
class Receiver:
    secrets: dict[str, str] = field(default_factory=dict)  # path -> secret ("" : unsigned)
    fail_first: int = 0  # answers 503 to this many requests first
    port: int = 0
    #: path -> key -> bodies answered 2xx (a receiver that drops repeats processes each once)
    accepted: dict[str, dict[str, list[bytes]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    bad_signatures: int = 0
    failed: int = 0
    requests: int = 0
    held: list[str] = field(default_factory=list)  # keys whose request was held open
    _hold: asyncio.Event | None = None
    _holding: asyncio.Event = field(default_factory=asyncio.Event)
    _release: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def keys(self, path: str) -> set[str]:
        return set(self.accepted[path])

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [json.loads(b[0]) for b in self.accepted[path].values()]

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        body = await request.read()
        secret = self.secrets.get(request.path, "")
        if secret and not verify(secret, body, request.headers.get(SIGNATURE_HEADER)):
            self.bad_signatures += 1
            return web.Response(status=401, text="bad signature")
        key = request.headers.get("Idempotency-Key", "")
        if self._hold is not None:
            self._hold = None
            self.held.append(key)
            self._holding.set()
            await self._release.wait()  # its sender is killed meanwhile: no answer reaches it
            return web.Response(status=200)
        if self.failed < self.fail_first:
            self.failed += 1
            return web.Response(status=503, headers={"Retry-After": "0"})
        self.accepted[request.path][key].append(body)
        return web.json_response({"ok": True})

    def hold_next(self) -> None:
        """Hold the next request open until :meth:`release`."""
        self._hold = asyncio.Event()
        self._holding.clear()
        self._release.clear()

    async def wait_holding(self, timeout: float) -> str:
        await asyncio.wait_for(self._holding.wait(), timeout)
        return self.held[-1]

    def release(self) -> None:
        self._release.set()

    async def start(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/{path:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        """Down: connections to its port are refused until :meth:`start` again."""
        self.release()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def wait_for(self, path: str, keys: set[str], timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not keys <= self.keys(path):
            if loop.time() > deadline:
                missing = sorted(keys - self.keys(path))
                raise AssertionError(f"{len(missing)} keys never reached {path}: {missing[:5]}")
            await asyncio.sleep(0.05)
