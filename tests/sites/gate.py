"""A bot manager in miniature: a TCP front that reads each connection's TLS ClientHello, judges
the client by it, and hands the connection to the site or to a challenge server.

What it reads is the raw hello (RFC 8446 §4.1.2): the cipher suites, the extensions in the order
sent, GREASE values (RFC 8701: Chrome and Safari put them among both), the ALPN protocols
offered, the supported groups and versions. :func:`judge` calls a hello *browser-like* when it
offers HTTP/2 in ALPN and either carries GREASE in its cipher suites and its extensions (Chrome,
Edge, Safari) or is Firefox's (record_size_limit and delegated_credentials, which no OpenSSL
client sends). Python's OpenSSL (aiohttp, requests, Scrapy's Twisted) does neither, so it is a
bot, whatever its headers say.

The front does not terminate TLS: once it has judged, it connects to the chosen upstream (a
real TLS server with a real certificate: the site, or :func:`start_challenge`, which answers
every request with a 403 challenge page), sends it the hello as read and splices the two
sockets, so the handshake the client completes is the upstream's own. Every connection is
recorded (:attr:`Gate.seen`) with its verdict and a JA4-like fingerprint (cipher suites and
extensions sorted, GREASE left out: stable across Chrome's shuffled extension order).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ssl
import struct
from dataclasses import dataclass, field

from aiohttp import web

from crawlfleet.demo.catalog import Catalog
from crawlfleet.demo.faults import Faults
from crawlfleet.demo.server import start_demo_server
from tests.tls import LocalCA

GREASE = frozenset(((b << 8) | b) for b in range(0x0A, 0x100, 0x10))
EXT_SNI, EXT_GROUPS, EXT_ALPN, EXT_VERSIONS = 0, 10, 16, 43
EXT_RECORD_SIZE_LIMIT, EXT_DELEGATED_CREDENTIALS = 28, 34
CHALLENGE_PAGE = b"""<!DOCTYPE html><html><head><title>Just a moment...</title>
<script>window._cf_chl_opt = {cType: 'managed'};</script></head>
<body><div id="challenge-stage">Checking your browser before accessing the site.</div>
<script src="/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1"></script></body></html>
"""


@dataclass(frozen=True)
class ClientHello:
    """The parts of a ClientHello a fingerprint is made of."""

    version: int
    ciphers: tuple[int, ...]
    extensions: tuple[int, ...]
    alpn: tuple[str, ...] = ()
    groups: tuple[int, ...] = ()
    versions: tuple[int, ...] = ()
    server_name: str | None = None

    @property
    def grease(self) -> bool:
        return any(c in GREASE for c in self.ciphers) and any(e in GREASE for e in self.extensions)

    def fingerprint(self) -> str:
        """JA4-like: TLS version, counts, ALPN, and hashes of the sorted ciphers and extensions
        (GREASE, SNI and ALPN left out), so a browser that shuffles its extensions keeps it."""
        ciphers = sorted(c for c in self.ciphers if c not in GREASE)
        exts = sorted(
            e for e in self.extensions if e not in GREASE and e not in (EXT_SNI, EXT_ALPN)
        )
        top = max((v for v in self.versions if v not in GREASE), default=self.version)
        alpn = self.alpn[0] if self.alpn else "-"

        def digest(values: list[int]) -> str:
            text = ",".join(f"{v:04x}" for v in values)
            return hashlib.sha256(text.encode()).hexdigest()[:12]

        return f"t{top:04x}_{len(ciphers)}{len(exts)}_{alpn}_{digest(ciphers)}_{digest(exts)}"


class NotAHello(ValueError):
    """The bytes are not a TLS ClientHello."""


def record_length(head: bytes) -> int:
    """The length of the TLS record whose 5-byte header is ``head`` (handshake records only)."""
    if len(head) < 5 or head[0] != 0x16:
        raise NotAHello("not a TLS handshake record")
    return int(struct.unpack("!H", head[3:5])[0])


def parse_client_hello(record: bytes) -> ClientHello:
    """Parse one TLS record holding a ClientHello (RFC 8446 §4.1.2)."""
    data = memoryview(record)[5 : 5 + record_length(record[:5])]
    if len(data) < 4 or data[0] != 1:
        raise NotAHello("not a ClientHello")
    body = data[4 : 4 + int.from_bytes(data[1:4], "big")]
    pos = 2 + 32  # legacy_version, random
    version = int.from_bytes(body[0:2], "big")
    pos += 1 + body[pos]  # legacy_session_id
    n = int.from_bytes(body[pos : pos + 2], "big")
    ciphers = tuple(int.from_bytes(body[i : i + 2], "big") for i in range(pos + 2, pos + 2 + n, 2))
    pos += 2 + n
    pos += 1 + body[pos]  # legacy_compression_methods
    end = pos + 2 + int.from_bytes(body[pos : pos + 2], "big") if pos < len(body) else pos
    pos += 2
    extensions: list[int] = []
    fields: dict[int, bytes] = {}
    while pos + 4 <= end:
        kind = int.from_bytes(body[pos : pos + 2], "big")
        size = int.from_bytes(body[pos + 2 : pos + 4], "big")
        extensions.append(kind)
        fields[kind] = bytes(body[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return ClientHello(
        version,
        ciphers,
        tuple(extensions),
        alpn=_alpn(fields.get(EXT_ALPN, b"")),
        groups=_u16_list(fields.get(EXT_GROUPS, b""), 2),
        versions=_u16_list(fields.get(EXT_VERSIONS, b""), 1),
        server_name=_server_name(fields.get(EXT_SNI, b"")),
    )


def _u16_list(data: bytes, prefix: int) -> tuple[int, ...]:
    values = data[prefix:]
    return tuple(int.from_bytes(values[i : i + 2], "big") for i in range(0, len(values) - 1, 2))


def _alpn(data: bytes) -> tuple[str, ...]:
    out, pos = [], 2
    while pos < len(data):
        size = data[pos]
        out.append(data[pos + 1 : pos + 1 + size].decode("ascii", "replace"))
        pos += 1 + size
    return tuple(out)


def _server_name(data: bytes) -> str | None:
    if len(data) < 5:
        return None
    size = int.from_bytes(data[3:5], "big")
    return data[5 : 5 + size].decode("ascii", "replace")


def judge(hello: ClientHello) -> str | None:
    """The browser family a hello looks like (``chromium``, ``safari``, ``firefox``), or None:
    a bot. Chrome and Safari both GREASE; Chrome adds application settings (ALPS)."""
    if "h2" not in hello.alpn:
        return None
    if hello.grease:
        alps = any(e in (17513, 17613) for e in hello.extensions)
        return "chromium" if alps else "safari"
    firefox = {EXT_RECORD_SIZE_LIMIT, EXT_DELEGATED_CREDENTIALS} <= set(hello.extensions)
    return "firefox" if firefox else None


@dataclass
class Seen:
    """One connection through the gate."""

    family: str | None
    fingerprint: str
    alpn: tuple[str, ...]
    server_name: str | None


@dataclass
class Gate:
    """A running gate; ``port`` is where clients connect."""

    port: int
    site: tuple[str, int]
    challenge: tuple[str, int]
    seen: list[Seen] = field(default_factory=list)
    server: asyncio.Server | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def passed(self) -> int:
        return sum(1 for s in self.seen if s.family is not None)

    @property
    def refused(self) -> int:
        return sum(1 for s in self.seen if s.family is None)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.server is not None:
            await self.server.wait_closed()


async def start_gate(site: tuple[str, int], challenge: tuple[str, int]) -> Gate:
    """A gate on a free loopback port in front of ``site`` (browser-like hellos) and
    ``challenge`` (every other one); both ``(host, port)`` of TLS servers."""
    gate = Gate(0, site, challenge)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readexactly(5)
            record = head + await reader.readexactly(record_length(head))
            hello = parse_client_hello(record)
        except (asyncio.IncompleteReadError, NotAHello, IndexError, ConnectionError):
            writer.close()
            return
        family = judge(hello)
        gate.seen.append(Seen(family, hello.fingerprint(), hello.alpn, hello.server_name))
        host, port = gate.site if family is not None else gate.challenge
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        up_writer.write(record)
        task = asyncio.current_task()
        assert task is not None
        gate.tasks.add(task)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except asyncio.CancelledError:
            for w in (writer, up_writer):
                w.close()
        finally:
            gate.tasks.discard(task)

    gate.server = await asyncio.start_server(handle, "127.0.0.1", 0)
    gate.port = gate.server.sockets[0].getsockname()[1]
    return gate


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def start_challenge(context: ssl.SSLContext) -> tuple[web.AppRunner, int]:
    """A TLS server that answers every request with a 403 challenge page (Cloudflare's
    markers), as a bot manager answers a client it does not believe."""

    async def challenge(request: web.Request) -> web.Response:
        return web.Response(
            status=403,
            body=CHALLENGE_PAGE,
            content_type="text/html",
            headers={"cf-mitigated": "challenge"},
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", challenge)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    server = site._server
    assert server is not None
    return runner, server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


@dataclass
class GatedShop:
    """The demo shop over HTTPS behind a gate: ``base`` goes through the gate, ``open_base``
    straight to the shop (the same pages, no gate)."""

    base: str
    open_base: str
    gate: Gate
    runners: list[web.AppRunner]

    async def close(self) -> None:
        await self.gate.close()
        for runner in self.runners:
            await runner.cleanup()


async def start_gated_shop(
    ca: LocalCA, catalog: Catalog, faults: Faults | None = None
) -> GatedShop:
    """The demo shop with ``ca``'s certificate, a challenge server and a gate in front."""
    shop, shop_runner = await start_demo_server(catalog, faults, ssl_context=ca.server_context())
    challenge_runner, challenge_port = await start_challenge(ca.server_context())
    shop_port = int(shop.rsplit(":", 1)[1])
    gate = await start_gate(("127.0.0.1", shop_port), ("127.0.0.1", challenge_port))
    return GatedShop(
        f"https://localhost:{gate.port}",
        f"https://localhost:{shop_port}",
        gate,
        [shop_runner, challenge_runner],
    )
