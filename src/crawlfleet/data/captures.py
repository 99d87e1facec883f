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
    """Payloads this worker archived in full, by payload digest (the SHA-1 of the body as
    archived: as received, content-coding and all): a later page with the same bytes is archived
    as a ``revisit`` of the first capture instead of storing the bytes again (WARC's
    identical-payload-digest profile: the same bytes, not only the same decoded page).

    A capture is remembered as soon as its page is judged data (not a block or an error): the
    revisit follows it in the same WARC stream, so whenever the revisit is durable, so is the
    capture. Whether the store took the page is noted apart, by the page's content hash (its
    decoded body's: :meth:`confirm`): only such pages count as parsed for a spider's
    ``skip_duplicate_content`` (a refused lease's page is fetched again elsewhere, and its
    records come from there). A cache: bounded, and a miss only costs a full copy in the WARC,
    never a page or a record.
    """

    def __init__(self, max_size: int = CAPTURES_MAX) -> None:
        self.max_size = max_size
        #: payload digest -> (its first capture, the content hash of its page)
        self._by_payload: OrderedDict[bytes, tuple[Capture, bytes]] = OrderedDict()
        #: content hash -> how many remembered payloads have it (one, but for other codings)
        self._contents: dict[bytes, int] = {}
        self._confirmed: set[bytes] = set()

    def get(self, payload: bytes) -> Capture | None:
        """The first capture of the payload whose digest is ``payload``, if remembered."""
        kept = self._by_payload.get(payload)
        if kept is None:
            return None
        self._by_payload.move_to_end(payload)
        return kept[0]

    def resize(self, max_size: int) -> None:
        """Remember at most ``max_size`` captures from now on (the oldest go first)."""
        self.max_size = max_size
        while len(self._by_payload) > max_size:
            self._forget_oldest()

    def remember(self, payload: bytes, capture: Capture, content: bytes | None = None) -> None:
        """``capture`` archived the payload ``payload`` in full, of a page whose content hash is
        ``content`` (the same when the body had no content-coding)."""
        if payload in self._by_payload:
            return  # the first capture of a payload stays the one referred to
        content = payload if content is None else content
        self._by_payload[payload] = (capture, content)
        self._contents[content] = self._contents.get(content, 0) + 1
        if len(self._by_payload) > self.max_size:
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        _, (_, content) = self._by_payload.popitem(last=False)
        left = self._contents.pop(content) - 1
        if left:
            self._contents[content] = left
        else:
            self._confirmed.discard(content)

    def clear(self) -> None:
        """Forget every capture (the WARC stream they were written to was cut: a later revisit
        must not refer to a capture that may be lost with it)."""
        self._by_payload.clear()
        self._contents.clear()
        self._confirmed.clear()

    def confirm(self, content: bytes) -> None:
        """The store accepted a page with this content hash: its output is in the store."""
        if content in self._contents:
            self._confirmed.add(content)

    def parsed(self, content: bytes) -> bool:
        """Whether a page with this content was parsed and its output accepted by the store."""
        return content in self._confirmed

    def __len__(self) -> int:
        return len(self._by_payload)
