"""``crawl -o``'s record tail: each record once, one read again passed over, a change counted."""

from __future__ import annotations

import asyncio
from typing import Any

from crawlfleet.local.output import RecordTail
from crawlfleet.model import RecordRow


class Store:
    """The records as the store would return them (ordered by update time, then key)."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, RecordRow]] = []
        self.reads = 0

    def put(self, at: float, key: str, **data: Any) -> None:
        self.rows = [r for r in self.rows if r[1].key != key]
        self.rows.append((at, RecordRow(key, data, f"http://x/{key}", at)))
        self.rows.sort(key=lambda r: (r[0], r[1].key))

    async def records_since(
        self, job: str, after: tuple[float, str | None], limit: int
    ) -> list[tuple[float, RecordRow]]:
        self.reads += 1
        t, key = after
        out = [r for r in self.rows if (r[0], r[1].key) > (t, key or "")]
        return out[:limit]


class Feed:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def write(self, rows: list[dict[str, Any]]) -> None:
        self.rows.extend(rows)


def test_each_record_written_once__reread_skipped__changed_counted() -> None:
    store, feed = Store(), Feed()
    tail = RecordTail(store, "job", feed, (0.0, ""))  # type: ignore[arg-type]
    store.put(10.0, "a", v=1)
    store.put(10.5, "b", v=1)
    assert asyncio.run(tail.poll()) == 2
    store.put(11.0, "c", v=1)
    assert asyncio.run(tail.poll()) == 1  # a and b are read again (the margin), not written
    store.put(11.5, "a", v=1)  # stored again, same data: nothing new
    store.put(12.0, "b", v=2)  # changed after it was written: counted
    assert asyncio.run(tail.poll()) == 0
    assert [r["v"] for r in feed.rows] == [1, 1, 1]
    assert tail.changed == 1
    assert tail.written["b"][0] == 12.0
