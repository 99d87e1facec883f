"""Sitemaps (sitemaps.org): a site's own list of its pages, read as a stream.

:func:`open_sitemap` takes a fetched sitemap (XML, or gzip of XML whatever the server called
it) and yields its entries one at a time: ``<url>`` entries of a ``urlset`` (a page, its
``lastmod``, its ``xhtml:link rel="alternate"`` versions) or ``<sitemap>`` entries of a
``sitemapindex`` (another sitemap). The XML is parsed incrementally and every entry is dropped
once read, so a file of 50,000 URLs costs the memory of one chunk of it, not of a tree; a gzip file
is inflated as it is read, never past :data:`MAX_SITEMAP_BYTES` (a decompression bomb stops
there). Entities are never resolved and nothing is fetched (no DTD, no network): a hostile
sitemap gets no further than a malformed one.

Anything that is not a sitemap raises :class:`~crawlfleet.errors.SitemapError` with one line
saying why (not XML, another root element, cut short, too big), at the entry where it shows.

:func:`sitemaps_in_robots` reads the ``Sitemap:`` lines of a robots.txt; :func:`allowed_hosts`
is the cross-host rule of sitemaps.org (a sitemap lists pages of its own host, and of the hosts
whose robots.txt listed it).
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from crawlfleet.errors import SitemapError

__all__ = [
    "MAX_SITEMAP_BYTES",
    "Sitemap",
    "SitemapEntry",
    "allowed_hosts",
    "open_sitemap",
    "parse_lastmod",
    "sitemaps_in_robots",
]

#: the most bytes a sitemap may have once inflated (sitemaps.org: 50 MB)
MAX_SITEMAP_BYTES: Final = 50 * 1024 * 1024
#: how much of the inflated stream the parser reads at a time
_CHUNK: Final = 64 * 1024
_GZIP_MAGIC: Final = b"\x1f\x8b"
_KINDS: Final = ("urlset", "sitemapindex")
_YEAR: Final = re.compile(r"\d{4}")
_YEAR_MONTH: Final = re.compile(r"\d{4}-\d{2}")


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """One entry: its ``loc``, its ``lastmod`` (epoch seconds, None when absent or unreadable)
    and, in a urlset, the ``hreflang`` alternates it names."""

    loc: str
    lastmod: float | None = None
    alternates: tuple[str, ...] = ()

    def locs(self, alternate: bool = False) -> list[str]:
        """The entry's URL, and its alternates too with ``alternate``."""
        return [self.loc, *self.alternates] if alternate else [self.loc]


def parse_lastmod(text: str | None) -> float | None:
    """A W3C datetime (``2024``, ``2024-05``, ``2024-05-01``, ``2024-05-01T10:00:00+02:00``,
    ``...Z``, with fractions) as epoch seconds; a date without a zone is UTC. None for anything
    else: a bad ``lastmod`` is ignored, never an error."""
    if not text:
        return None
    value = text.strip()
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        if _YEAR.fullmatch(value):
            when = datetime(int(value), 1, 1)
        elif _YEAR_MONTH.fullmatch(value) and 1 <= int(value[5:]) <= 12:
            when = datetime(int(value[:4]), int(value[5:]), 1)
        else:
            return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


class _Capped(io.RawIOBase):
    """A readable stream that raises SitemapError once more than ``limit`` bytes came out, and
    turns a broken gzip stream into one."""

    def __init__(self, inner: io.BufferedIOBase | gzip.GzipFile, limit: int) -> None:
        self.inner, self.limit, self.seen = inner, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self.inner.read(min(len(buffer), _CHUNK))
        except (OSError, EOFError, zlib.error) as exc:
            raise SitemapError(f"broken gzip data: {exc}") from None
        self.seen += len(data)
        if self.seen > self.limit:
            raise SitemapError(f"larger than {self.limit:,} bytes once inflated")
        buffer[: len(data)] = data
        return len(data)


def _local(tag: Any) -> str:
    """An element's name without its namespace (sitemaps in the wild use several, or none)."""
    if not isinstance(tag, str):
        return ""  # a comment or processing instruction
    return tag.rsplit("}", 1)[-1]


class Sitemap:
    """A sitemap being read: its ``kind`` (``"urlset"`` or ``"sitemapindex"``) is known at
    once; iterate it (once) for its entries."""

    def __init__(self, body: bytes, *, max_size: int = MAX_SITEMAP_BYTES) -> None:
        from lxml import etree

        if not body.strip():
            raise SitemapError("empty: not a sitemap")
        raw: io.BufferedIOBase | gzip.GzipFile = io.BytesIO(body)
        if body[:2] == _GZIP_MAGIC:
            raw = gzip.GzipFile(fileobj=raw, mode="rb")
        self._source = io.BufferedReader(_Capped(raw, max_size), _CHUNK)
        self._syntax_error = etree.XMLSyntaxError
        # the elements that matter, matched by libxml2 itself (in any namespace, or none)
        self._events = etree.iterparse(
            self._source,
            events=("start", "end"),
            tag=("{*}urlset", "{*}sitemapindex", "{*}url", "{*}sitemap"),
            resolve_entities=False,
            no_network=True,
            load_dtd=False,
            huge_tree=False,
            remove_comments=True,
            remove_pis=True,
        )
        event, root = self._next()
        if event is None:
            raise SitemapError("not a sitemap: no <urlset> or <sitemapindex> in it")
        self.kind = _local(root.tag)
        if self.kind not in _KINDS or root.getparent() is not None:
            raise SitemapError(f"not a sitemap: its root element is <{_local(root.tag)}>")
        self._root = root
        self._entry = "url" if self.kind == "urlset" else "sitemap"
        self._used = False

    def _next(self) -> tuple[str | None, Any]:
        try:
            return next(self._events)  # type: ignore[no-any-return]
        except StopIteration:
            return None, None
        except self._syntax_error as exc:
            raise SitemapError(f"malformed XML: {exc}") from None

    def __iter__(self) -> Iterator[SitemapEntry]:
        if self._used:
            raise RuntimeError("a Sitemap is read once")
        self._used = True
        root, entry_name = self._root, self._entry
        while True:
            event, element = self._next()
            if event is None:
                return
            if event != "end" or _local(element.tag) != entry_name:
                continue
            entry = self._read(element)
            # what is read goes: the tree holds only what the parser read ahead
            element.clear()
            while element.getprevious() is not None:
                del root[0]
            if entry is not None:
                yield entry

    @staticmethod
    def _read(element: Any) -> SitemapEntry | None:
        loc = lastmod = None
        alternates: list[str] = []
        for child in element:
            name = _local(child.tag)
            if name == "loc":
                loc = (child.text or "").strip()
            elif name == "lastmod":
                lastmod = parse_lastmod(child.text)
            elif name == "link" and child.get("rel") == "alternate":
                href = (child.get("href") or "").strip()
                if href:
                    alternates.append(href)
        if not loc:
            return None
        return SitemapEntry(loc, lastmod, tuple(a for a in alternates if a != loc))

    @property
    def held(self) -> int:
        """Entries the parse holds in memory right now: the one being read and those the parser
        read ahead (one chunk of the stream), flat whatever the file's size."""
        return len(self._root)


def open_sitemap(body: bytes, *, max_size: int = MAX_SITEMAP_BYTES) -> Sitemap:
    """The sitemap in ``body`` (XML, or gzip of XML), ready to iterate; raises SitemapError
    when it is not one."""
    return Sitemap(body, max_size=max_size)


def sitemaps_in_robots(text: str) -> list[str]:
    """The sitemap URLs a robots.txt lists (``Sitemap:`` lines, any case, in order)."""
    from protego import Protego

    return [url.strip() for url in Protego.parse(text).sitemaps if url.strip()]


def allowed_hosts(sitemap_host: str, listed_by: Iterable[str] = ()) -> frozenset[str]:
    """The hosts a sitemap may list pages of (sitemaps.org's cross-host rule): its own, and
    those whose robots.txt listed it (``listed_by``, carried down a tree of indexes)."""
    return frozenset(h.lower() for h in (sitemap_host, *listed_by) if h)
