"""Record feeds: records written to a file, or stdout, while a crawl stores them (``crawl -o``).

The format follows the file's extension (or ``--format``), rows are shaped as by
:mod:`crawlfleet.data.export` (a record's data; cells by the same rules), and a feed either
appends to what the file holds (``-o``, as in Scrapy) or replaces it (``-O``):

* ``jsonl``: one JSON object a line; appending adds lines.
* ``json``: one JSON array, valid after every batch: the closing bracket is written with each
  batch and overwritten by the next, so an interrupted crawl leaves a readable file, and
  appending reopens an existing array before its bracket.
* ``csv``: the header from the first rows (or, appending, the file's own header); a column
  first seen later widens the file once at close (on stdout it cannot, and is reported).
* ``parquet``: row groups as records come, in ``FILE.tmp`` until the feed is closed (a Parquet
  file is readable only once closed: Ctrl-C closes it, a kill -9 leaves the ``.tmp``); append
  is refused (Parquet files cannot grow).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, Final, Protocol

from crawlfleet.data.export import (  # the row shape and cell rules of export, shared
    _cell,
    _dumps,
    _ParquetSink,
    _union_keys,
    _widen_csv,
)
from crawlfleet.errors import UsageError

__all__ = ["FEED_FORMATS", "Feed", "check_writable", "feed_format", "open_feed"]

FEED_FORMATS: Final = ("jsonl", "json", "csv", "parquet")
STDOUT: Final = "-"
_SUFFIXES: Final = {"jsonl": "jsonl", "ndjson": "jsonl", "jl": "jsonl", "json": "json"}


class Feed(Protocol):
    """Where a crawl's records go as they are stored."""

    path: str
    count: int  # rows written by this feed
    notes: list[str]  # what the user should know at the end (one line each)

    def write(self, rows: list[dict[str, Any]]) -> None: ...
    def close(self) -> None: ...


def feed_format(path: str, fmt: str | None) -> str:
    """The format of ``path``: ``fmt`` if given, else by extension (JSON lines for stdout).

    Raises UsageError (one line) for an extension that names no format crawlfleet writes
    (``.xml``, ``.txt``...): a file must not get JSON lines under a name that promises
    something else."""
    if fmt:
        if fmt not in FEED_FORMATS:
            raise UsageError(f"unknown format {fmt!r} (one of {', '.join(FEED_FORMATS)})")
        return fmt
    if path == STDOUT:
        return "jsonl"
    suffix = Path(path).suffix.lstrip(".").lower()
    found = _SUFFIXES.get(suffix, suffix if suffix in FEED_FORMATS else None)
    if found is None:
        what = f"a .{suffix} file" if suffix else "a file without an extension"
        raise UsageError(
            f"cannot tell which format to write to {path} ({what}): crawlfleet writes "
            ".jsonl, .json, .csv and .parquet; name the file so, or give --format"
        )
    return found


def check_writable(path: str) -> None:
    """Refuse, with one line, a file that cannot be written (before any work is done for it)."""
    target = Path(path)
    probe = target.with_name(target.name + ".probe")
    try:
        with open(probe, "wb"):
            pass
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def open_feed(path: str, fmt: str, *, overwrite: bool) -> Feed:
    """A feed of ``fmt`` to ``path`` (``-``: stdout); refuses with one line what cannot work."""
    if path == STDOUT:
        if fmt == "parquet":
            raise UsageError("-o - writes JSON lines, JSON or CSV, not Parquet")
        return _STREAMS[fmt](path, sys.stdout.buffer, append=False)
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory")
    append = not overwrite and target.is_file() and target.stat().st_size > 0
    if fmt == "parquet":
        if append:
            raise UsageError(f"cannot append to {path} (a Parquet file): use -O to replace it")
        return _ParquetFeed(path)
    try:
        handle = open(target, "r+b" if append else "wb")  # noqa: SIM115 - the feed owns it
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    return _STREAMS[fmt](path, handle, append=append)


def _line(row: Mapping[str, Any]) -> bytes:
    try:
        return _dumps(row).encode()
    except UnicodeEncodeError:  # a lone surrogate: escaped JSON is still the same value
        return _dumps(row, ascii=True).encode()


class _JsonLines:
    def __init__(self, path: str, out: IO[bytes], *, append: bool) -> None:
        self.path, self.out, self.count = path, out, 0
        self.notes: list[str] = []
        if append:
            out.seek(0, os.SEEK_END)
            out.seek(out.tell() - 1)
            if out.read(1) != b"\n":  # a last line without its newline
                out.write(b"\n")

    def write(self, rows: list[dict[str, Any]]) -> None:
        self.out.write(b"".join(_line(row) + b"\n" for row in rows))
        self.out.flush()
        self.count += len(rows)

    def close(self) -> None:
        _close(self.out)


class _JsonArray:
    """A JSON array kept valid on disk: each batch overwrites the closing bracket."""

    _END: Final = b"\n]\n"

    def __init__(self, path: str, out: IO[bytes], *, append: bool) -> None:
        self.path, self.out, self.count = path, out, 0
        self.notes: list[str] = []
        self.seekable = out is not sys.stdout.buffer and out.seekable()
        self.empty = True
        if append:
            self._reopen()
        elif self.seekable:
            out.write(b"[" + self._END)  # an empty array until rows come
            out.flush()
        else:
            out.write(b"[")

    def _reopen(self) -> None:
        """Position before the closing bracket of the array on disk (its tail read only)."""
        head = self.out.read(64).lstrip()
        end = self.out.seek(0, os.SEEK_END)
        start = self.out.seek(max(0, end - 4096))
        tail = self.out.read().rstrip()
        if not head.startswith(b"[") or not tail.endswith(b"]"):
            self.out.close()
            raise UsageError(f"cannot append to {self.path}: it is not a JSON array")
        self.empty = tail[:-1].rstrip().endswith(b"[")
        self.out.seek(start + len(tail) - 1)
        self.out.truncate()
        self.out.write(self._END)
        self.out.flush()

    def write(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        if self.seekable:
            self.out.seek(-len(self._END), os.SEEK_END)
        parts = [
            (b"\n" if self.empty and i == 0 else b",\n") + _line(r) for i, r in enumerate(rows)
        ]
        self.out.write(b"".join(parts) + (self._END if self.seekable else b""))
        if self.seekable:
            self.out.truncate()
        self.out.flush()
        self.empty = False
        self.count += len(rows)

    def close(self) -> None:
        if not self.seekable:
            self.out.write(b"]\n" if self.empty else self._END)
        _close(self.out)


class _Csv:
    def __init__(self, path: str, out: IO[bytes], *, append: bool) -> None:
        self.path, self.out, self.count = path, out, 0
        self.notes: list[str] = []
        self.text = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", newline="")
        self.writer = csv.writer(self.text)
        self.columns: list[str] = []
        self.header = 0  # columns in the header on disk
        if append:
            self.text.seek(0)
            self.columns = next(csv.reader(self.text), [])
            self.header = len(self.columns)
            self.text.seek(0, os.SEEK_END)

    def write(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        if not self.columns:
            self.columns = _union_keys(rows)
            self.header = len(self.columns)
            self.writer.writerow(self.columns)
        index = {name: i for i, name in enumerate(self.columns)}
        for row in rows:
            for name in row:
                if name not in index:
                    index[name] = len(self.columns)
                    self.columns.append(name)
            cells = [""] * len(self.columns)
            for name, value in row.items():
                cells[index[name]] = _cell(value)
            self.writer.writerow(cells)
        self.text.flush()
        self.count += len(rows)

    def close(self) -> None:
        self.text.flush()
        widened = len(self.columns) > self.header
        if self.out is sys.stdout.buffer:
            self.text.detach()
            if widened:
                extra = ", ".join(self.columns[self.header :])
                self.notes.append(f"columns first seen after the CSV header: {extra}")
            return
        self.text.close()
        if widened:
            _widen_csv(Path(self.path), self.columns)


class _ParquetFeed:
    def __init__(self, path: str) -> None:
        self.path, self.count = path, 0
        self.notes: list[str] = []
        self.tmp = Path(f"{path}.tmp")
        self.sink = _ParquetSink(self.tmp)
        self.pending: list[dict[str, Any]] = []

    def write(self, rows: list[dict[str, Any]]) -> None:
        self.pending.extend(rows)
        if len(self.pending) >= 10_000:  # row groups of a useful size, memory bounded
            self._flush()

    def _flush(self) -> None:
        if self.pending:
            self.sink.write(self.pending)
            self.count += len(self.pending)
            self.pending = []

    def close(self) -> None:
        try:
            self._flush()
            self.sink.close()
            os.replace(self.tmp, self.path)
        finally:
            self.sink.abort()


def _close(out: IO[bytes]) -> None:
    if out is sys.stdout.buffer:
        with contextlib.suppress(OSError):
            out.flush()
        return
    out.close()


_STREAMS: Final[dict[str, Callable[..., Feed]]] = {
    "jsonl": _JsonLines,
    "json": _JsonArray,
    "csv": _Csv,
}
