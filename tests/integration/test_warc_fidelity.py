"""The WARC holds what the site sent: each redirect of a seed as its own exchange (a replay of the
URL asked for answers 302 and its Location, as the site did), and content-coded bodies as they
came (the gzip bytes, ``Content-Encoding`` as sent, the payload digest over those bytes, as
other crawlers' indexes have it), with the page's records parsed from the decoded body.

A real site on a socket, a real ``crawlfleet crawl`` (both HTTP fetchers), read back with warcio
and checked with ``warcio check``.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from tests.integration.helpers import read_jsonl
from warcio.archiveiterator import ArchiveIterator

PAGE = b"<html><head><title>%s</title></head><body>" + b"<p>words</p>" * 200 + b"</body></html>"
#: the same gzip bytes every time (mtime 0): the two gzip pages are one payload
GZIPPED = gzip.compress(PAGE % b"gzipped", mtime=0)

SPIDER = """
from crawlfleet import Spider


class Fidelity(Spider):
    name = "fidelity"
    start_urls = {start_urls!r}
    fetcher = {fetcher!r}

    def parse(self, response):
        yield {{"url": response.url, "asked": response.request_url,
               "title": response.css("title::text").get()}}
"""


@dataclass
class Site:
    base: str
    hits: dict[str, int]


async def _redirect(request: web.Request) -> web.Response:
    n = int(request.match_info["n"])
    target = f"/redirect/{n - 1}" if n > 1 else "/final"
    return web.Response(status=302, headers={"Location": target}, text=f"go to {target}")


async def _final(request: web.Request) -> web.Response:
    return web.Response(body=PAGE % b"final", content_type="text/html")


async def _gzip(request: web.Request) -> web.Response:
    headers = {"Content-Encoding": "gzip", "Content-Type": "text/html"}
    return web.Response(body=GZIPPED, headers=headers)


async def _gzip_chunked(request: web.Request) -> web.StreamResponse:
    headers = {"Content-Encoding": "gzip", "Content-Type": "text/html"}
    response = web.StreamResponse(headers=headers)
    response.enable_chunked_encoding()
    await response.prepare(request)
    for start in range(0, len(GZIPPED), 100):  # several chunks: framing that is not stored
        await response.write(GZIPPED[start : start + 100])
    await response.write_eof()
    return response


async def _robots(request: web.Request) -> web.Response:
    return web.Response(text="User-agent: *\nAllow: /\n")


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    hits: dict[str, int] = {}

    @web.middleware
    async def count(request: web.Request, handler: Any) -> web.StreamResponse:
        hits[request.path] = hits.get(request.path, 0) + 1
        response: web.StreamResponse = await handler(request)
        return response

    app = web.Application(middlewares=[count])
    app.router.add_get("/redirect/{n}", _redirect)
    app.router.add_get("/final", _final)
    app.router.add_get("/gzip", _gzip)
    app.router.add_get("/gzip-chunked", _gzip_chunked)
    app.router.add_get("/robots.txt", _robots)
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield Site(f"http://127.0.0.1:{port}", hits)
    finally:
        await runner.cleanup()


async def _crawlfleet(args: list[str], cwd: Path) -> tuple[int, str]:
    """``crawlfleet ARGS`` in ``cwd`` without blocking the event loop (the site runs on it)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "crawlfleet",
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, err.decode(errors="replace")


def _records(directory: Path) -> list[dict[str, Any]]:
    """Every request, response and revisit record of the closed WARC files, in file order."""
    rows = []
    for path in sorted(directory.glob("*.warc.gz")):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type not in ("request", "response", "revisit"):
                    continue
                h, http = record.rec_headers, record.http_headers
                assert http is not None
                rows.append(
                    {
                        "type": record.rec_type,
                        "uri": h.get_header("WARC-Target-URI"),
                        "id": h.get_header("WARC-Record-ID"),
                        "digest": h.get_header("WARC-Payload-Digest"),
                        "refers_to": h.get_header("WARC-Refers-To"),
                        "line": http.protocol + " " + http.statusline,
                        "http": http,
                        "raw": record.raw_stream.read(),
                    }
                )
    return rows


def _sha1(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


async def _crawl(
    tmp_path: Path, starts: list[str], fetcher: str
) -> tuple[Path, list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Crawl ``starts``: the WARC directory, its records, the spider's records by URL asked."""
    spider = tmp_path / "fidelity.py"
    spider.write_text(SPIDER.format(start_urls=starts, fetcher=fetcher))
    code, err = await _crawlfleet(["crawl", str(spider), "-o", "out.jsonl"], tmp_path)
    assert code == 0, err[-3000:]
    warc_dir = tmp_path / ".crawlfleet" / "warc"
    records = {r["asked"]: r for r in read_jsonl(tmp_path / "out.jsonl")}
    return warc_dir, _records(warc_dir), records


async def _warcio_check(warc_dir: Path) -> None:
    """``warcio check``: every block and payload digest of every record is right."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "import sys; from warcio.cli import main; sys.exit(main())",
        "check",
        "-v",
        *map(str, sorted(warc_dir.glob("*.warc.gz"))),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0, out.decode()[-3000:]


FETCHERS = pytest.mark.parametrize("fetcher", ["http", "impersonate"])


@FETCHERS
async def test_a_redirected_seed__each_hop_is_archived_before_the_page(
    tmp_path: Path, site: Site, fetcher: str
) -> None:
    b = site.base
    _, rows, records = await _crawl(tmp_path, [f"{b}/redirect/2"], fetcher)
    responses = [r for r in rows if r["type"] != "request"]
    assert [r["uri"] for r in responses] == [f"{b}/redirect/2", f"{b}/redirect/1", f"{b}/final"]
    assert [r["http"].get_statuscode() for r in responses] == ["302", "302", "200"]
    assert [r["http"].get_header("Location") for r in responses] == ["/redirect/1", "/final", None]
    assert responses[0]["raw"] == b"go to /redirect/1"  # a redirect's body, as sent
    assert responses[0]["digest"] == _sha1(b"go to /redirect/1")
    requests = [r for r in rows if r["type"] == "request"]
    assert [r["line"].rsplit(" ", 1)[0] for r in requests] == [
        "GET /redirect/2",
        "GET /redirect/1",
        "GET /final",
    ]
    assert site.hits["/redirect/2"] == site.hits["/redirect/1"] == site.hits["/final"] == 1
    assert records[f"{b}/redirect/2"]["url"] == f"{b}/final"
    assert records[f"{b}/redirect/2"]["title"] == "final"
    await _warcio_check(tmp_path / ".crawlfleet" / "warc")


@FETCHERS
async def test_gzip_pages__archived_as_received_digest_over_the_gzip_bytes(
    tmp_path: Path, site: Site, fetcher: str
) -> None:
    b = site.base
    starts = [f"{b}/gzip", f"{b}/gzip-chunked"]
    warc_dir, rows, records = await _crawl(tmp_path, starts, fetcher)
    gz = {r["uri"]: r for r in rows if r["type"] != "request"}
    first, second = sorted(gz.values(), key=lambda r: r["type"] != "response")
    assert first["type"] == "response"
    assert first["raw"] == GZIPPED
    assert first["http"].get_header("Content-Encoding") == "gzip"
    assert first["http"].get_header("Content-Length") == str(len(GZIPPED))
    assert first["digest"] == _sha1(GZIPPED)
    # the same bytes under another URL: a revisit of the first, with the same payload digest
    assert second["type"] == "revisit" and second["refers_to"] == first["id"]
    assert second["digest"] == first["digest"]
    assert second["http"].get_header("Content-Encoding") == "gzip"
    chunked = gz[f"{b}/gzip-chunked"]["http"]  # stored de-chunked: the framing is renamed
    assert chunked.get_header("Transfer-Encoding") is None
    assert chunked.get_header("X-Crawlfleet-Original-Transfer-Encoding") == "chunked"
    # warcio reads the body back decoded, and finds every digest right
    for path in warc_dir.glob("*.warc.gz"):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_headers.get_header("WARC-Record-ID") == first["id"]:
                    assert record.content_stream().read() == PAGE % b"gzipped"
    await _warcio_check(warc_dir)
    # the records come from the decoded pages
    assert records[f"{b}/gzip"]["title"] == records[f"{b}/gzip-chunked"]["title"] == "gzipped"
