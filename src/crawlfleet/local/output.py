"""``crawl -o`` / ``-O``: the job's records followed in the store and written to a feed while
the crawl runs (:mod:`crawlfleet.data.feeds` has the formats), each record once."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawlfleet.data.feeds import Feed
    from crawlfleet.frontier.ports import Insights, JobActivity, RecordCursor

__all__ = ["Output", "RecordTail", "finish_output", "open_tail"]


@dataclass(frozen=True)
class Output:
    """Where records go: ``path`` (``-`` for stdout) in ``fmt``; ``overwrite`` (``-O``) replaces
    the file with every record of the job, else (``-o``) this run's records are appended."""

    path: str
    fmt: str
    overwrite: bool


class RecordTail:
    """Follows a job's records in the store and writes each one once to a feed.

    Reads from a little before its cursor every time (``MARGIN`` seconds): update times are the
    writers' clocks, and a transaction that took longer can commit after a later one. A record
    read again at the update time it had is passed over at once (the margin reads most records
    two or three times); one updated again with the same data is skipped; with other data it
    is counted (``changed``): the file then holds its first version, and the caller decides
    (rewrite, or say so). It keeps an update time and a digest per record key written (memory
    grows with the records of one run: for jobs of millions of records, ``crawlfleet export``
    afterwards needs none).
    """

    MARGIN = 3.0
    PAGE = 1000

    def __init__(self, store: Insights, job: str, feed: Feed, start: RecordCursor) -> None:
        self.store, self.job, self.feed = store, job, feed
        self.start = start
        self.seen_until = start[0]
        #: per record key written: the update time and data digest of the version last seen
        self.written: dict[str, tuple[float, int]] = {}
        self.changed = 0

    async def poll(self) -> int:
        """Write the records stored since the last poll; returns how many were written."""
        t = max(self.start[0], self.seen_until - self.MARGIN)
        after: RecordCursor = self.start if t == self.start[0] else (t, None)
        new = 0
        while True:
            page = await self.store.records_since(self.job, after, self.PAGE)
            rows = []
            for updated_at, record in page:
                self.seen_until = max(self.seen_until, updated_at)
                known = self.written.get(record.key)
                if known is not None and known[0] == updated_at:
                    continue  # read again within the margin: the same version
                digest = hash(json.dumps(record.data, sort_keys=True, default=str))
                if known is None:
                    rows.append(_row(record.data))
                elif known[1] != digest:
                    self.changed += 1
                self.written[record.key] = (updated_at, digest)
            if rows:
                await asyncio.to_thread(self.feed.write, rows)
                new += len(rows)
            if len(page) < self.PAGE:
                return new
            after = (page[-1][0], page[-1][1].key)


def _row(data: Mapping[str, Any]) -> dict[str, Any]:
    return dict(data) if isinstance(data, Mapping) else {"_data": data}


def open_tail(
    store: Insights, name: str, output: Output | None, before: JobActivity | None
) -> RecordTail | None:
    """The output's feed and where it starts: every record of the job when overwriting, what
    comes after the job's newest record when appending (this run's records)."""
    if output is None:
        return None
    from crawlfleet.data.feeds import open_feed

    feed = open_feed(output.path, output.fmt, overwrite=output.overwrite)
    newest = before.records_updated_at if before else None
    start: RecordCursor = (0.0, "") if output.overwrite or newest is None else (newest, None)
    return RecordTail(store, name, feed, start)


async def finish_output(
    store: Insights, name: str, output: Output | None, tail: RecordTail | None
) -> tuple[int, int, list[str]]:
    """The last records, the feed closed; a replaced file whose records changed after they
    were written is rebuilt from the store (it then equals ``crawlfleet export``). Returns how
    many records the file got, how many changed after they were written, and notes."""
    if output is None or tail is None:
        return 0, 0, []
    from crawlfleet.data.feeds import open_feed

    await tail.poll()
    await asyncio.to_thread(tail.feed.close)
    notes = list(tail.feed.notes)
    if not tail.changed:
        return tail.feed.count, 0, notes
    if not output.overwrite or output.path == "-":
        notes.append(
            f"{tail.changed} records changed after they were written to {output.path}: "
            f"crawlfleet export --job {name} has their last version"
        )
        return tail.feed.count, tail.changed, notes
    rebuilt = f"{output.path}.rebuild"
    again = RecordTail(store, name, open_feed(rebuilt, output.fmt, overwrite=True), (0.0, ""))
    await again.poll()
    await asyncio.to_thread(again.feed.close)
    os.replace(rebuilt, output.path)
    return again.feed.count, tail.changed, notes
