"""A site that speaks HTTP/2 and nothing else (ALPN ``h2`` only, no HTTP/1.1 fallback), on the
``h2`` library over asyncio TLS: every path answers a small HTML page naming it and the
protocol, ``/gz`` a gzip-encoded one."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import ssl
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.exceptions


@dataclass
class H2Site:
    port: int
    server: asyncio.Server
    paths: list[str] = field(default_factory=list)

    async def close(self) -> None:
        self.server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), 5)


def _page(path: str) -> tuple[bytes, list[tuple[str, str]]]:
    body = f"<html><body><h1>{path} over h2</h1><a href='/next'>next</a></body></html>".encode()
    headers = [(":status", "200"), ("content-type", "text/html; charset=utf-8")]
    if path == "/gz":
        body = gzip.compress(body)
        headers.append(("content-encoding", "gzip"))
    return body, [*headers, ("content-length", str(len(body)))]


def _path(headers: object) -> str:
    for name, value in headers:  # type: ignore[attr-defined]
        key = name.decode() if isinstance(name, bytes) else name
        if key == ":path":
            return value.decode() if isinstance(value, bytes) else str(value)
    return "/"


async def start_h2_site(context: ssl.SSLContext) -> H2Site:
    """Serve on a free loopback port; ``context`` is a server context (ALPN set to h2 here)."""
    context.set_alpn_protocols(["h2"])
    site: H2Site

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_object = writer.get_extra_info("ssl_object")
        if ssl_object is None or ssl_object.selected_alpn_protocol() != "h2":
            writer.close()  # no HTTP/1.1 here
            return
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        try:
            while data := await reader.read(65536):
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        headers = {
                            k.decode() if isinstance(k, bytes) else k: v for k, v in event.headers
                        }
                        path = headers.get(":path", "/")
                        path = path.decode() if isinstance(path, bytes) else path
                        site.paths.append(path)
                        body, out = _page(path)
                        conn.send_headers(event.stream_id, out)
                        conn.send_data(event.stream_id, body, end_stream=True)
                writer.write(conn.data_to_send())
                await writer.drain()
        except (ConnectionError, h2.exceptions.ProtocolError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    site = H2Site(server.sockets[0].getsockname()[1], server)
    return site
