"""What a worker remembers of the payloads it archived, and where a page's records come from.

:class:`Captures` lets a page whose bytes were archived before (mirrors, shared templates) be
written as a WARC ``revisit`` record of the first capture; :class:`Provenance` is the WARC record
(and the capture it revisits) every record of a page names.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from crawlfleet.cache import DEFAULT_CACHE_MEMORY, sizes
from crawlfleet.data.warc import Capture

__all__ = ["CAPTURES_MAX", "Captures", "Provenance"]

#: most archived payloads remembered for WARC revisit records (least recently used go first)
CAPTURES_MAX = sizes(DEFAULT_CACHE_MEMORY).captures


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a page's records come from: its WARC record, and the first capture of the same
    payload when the page was archived as a revisit (``refers_to_*``)."""

    file: str | None = None
    record_id: str | None = None
    refers_to_file: str | None = None
    refers_to: str | None = None


class Captures:
    """Payloads this worker archived in full, by content hash: a later page with the same bytes
    is archived as a ``revisit`` of the first capture instead of storing the bytes again.

    A capture is remembered as soon as its page is judged data (not a block or an error): the
    revisit follows it in the same WARC stream, so whenever the revisit is durable, so is the
    capture. Whether the store took the page is noted apart (:meth:`confirm`): only such pages
    count as parsed for a spider's ``skip_duplicate_content`` (a refused lease's page is fetched
    again elsewhere, and its records come from there). A cache: bounded, and a miss only costs a
    full copy in the WARC, never a page or a record.
    """

    def __init__(self, max_size: int = CAPTURES_MAX) -> None:
        self.max_size = max_size
        self._by_hash: OrderedDict[bytes, Capture] = OrderedDict()
        self._confirmed: set[bytes] = set()

    def get(self, digest: bytes) -> Capture | None:
        capture = self._by_hash.get(digest)
        if capture is not None:
            self._by_hash.move_to_end(digest)
        return capture

    def resize(self, max_size: int) -> None:
        """Remember at most ``max_size`` captures from now on (the oldest go first)."""
        self.max_size = max_size
        while len(self._by_hash) > max_size:
            gone, _ = self._by_hash.popitem(last=False)
            self._confirmed.discard(gone)

    def remember(self, digest: bytes, capture: Capture) -> None:
        self._by_hash.setdefault(digest, capture)
        if len(self._by_hash) > self.max_size:
            gone, _ = self._by_hash.popitem(last=False)
            self._confirmed.discard(gone)

    def confirm(self, digest: bytes) -> None:
        """The store accepted a page with this content: its output is in the store."""
        if digest in self._by_hash:
            self._confirmed.add(digest)

    def parsed(self, digest: bytes) -> bool:
        """Whether a page with this content was parsed and its output accepted by the store."""
        return digest in self._confirmed

    def __len__(self) -> int:
        return len(self._by_hash)
