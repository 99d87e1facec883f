"""A quarantined record's raw snapshot, read from its WARC file by record id.

Served as plain text (the HTTP response as archived: status line, headers, body), never as a
page: the crawled page's scripts must not run on the dashboard's origin (``nosniff`` and a
sandboxing ``Content-Security-Policy`` make sure no browser renders it). Only WARC files of a
directory raw store are read, by base name inside it; an object store's are named for download.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final

from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from crawlfleet.model import QuarantineRow

__all__ = ["find_record", "snapshot_response"]

#: the most bytes of a snapshot served (a page past this is cut, and says so)
MAX_SNAPSHOT: Final = 4 << 20
HEADERS: Final = {
    "Content-Type": "text/plain; charset=utf-8",
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


def find_record(path: Path, record_id: str, limit: int = MAX_SNAPSHOT) -> bytes | None:
    """The HTTP block (headers and payload) of the WARC record ``record_id`` in ``path``."""
    with path.open("rb") as fh:
        try:
            for record in ArchiveIterator(fh):
                if record.rec_headers.get_header("WARC-Record-ID") != record_id:
                    continue
                head = record.http_headers.to_str().encode() if record.http_headers else b""
                body: bytes = record.content_stream().read(limit)
                return head + body
        except Exception:  # a file still being written ends mid-record: not found (yet)
            return None
    return None


def _where(raw: str, name: str) -> Path | None:
    if not name or Path(name).name != name or name.startswith("."):
        return None  # a base name only: nothing outside the raw store
    base = Path(raw)
    for candidate in (base / name, base / (name + ".open")):
        if candidate.is_file():
            return candidate
    return None


async def snapshot_response(row: QuarantineRow, raw: str) -> web.Response:
    """The snapshot of ``row`` (its first capture, for a page archived as a revisit)."""
    name = row.warc_refers_to_file or row.warc_file
    record_id = row.warc_refers_to or row.warc_record_id
    if not name or not record_id:
        raise web.HTTPNotFound(text="this record has no raw snapshot")
    if "://" in raw or "://" in name:
        where = name if "://" in name else f"{raw.rstrip('/')}/{name}"
        raise web.HTTPNotFound(text=f"the snapshot is in {where} (record {record_id})")
    path = _where(raw, name)
    if path is None:
        raise web.HTTPNotFound(text=f"no WARC file {name} in {raw}")
    body = await asyncio.to_thread(find_record, path, record_id)
    if body is None:
        raise web.HTTPNotFound(text=f"no record {record_id} in {name}")
    return web.Response(body=body, headers=HEADERS)
