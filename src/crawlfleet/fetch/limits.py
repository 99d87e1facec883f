"""Streaming content decoders that stop at a size cap.

``Content-Encoding`` is decoded here rather than by the HTTP client so that the cap applies to
*decoded* bytes and is enforced while decoding: a decompression bomb (a few kB that inflate to
gigabytes) is stopped after at most ``cap`` plus one small step of output, never materialised.

Each decoder produces output in bounded steps (zlib ``max_length``, brotli
``output_buffer_limit``, zstd ``write_size``) and counts what it produced; :class:`BodyDecoder`
chains them for stacked encodings and raises :class:`~crawlfleet.errors.BodyTooLarge` as soon as
any stage's output passes the cap.

gzip and deflate are inflated by ISA-L (``isal.isal_zlib``, zlib's interface): a quarter of
zlib's CPU for the same bytes, and inflating is most of what a gzipped page costs to decode.
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Protocol, cast

import brotli
import zstandard
from isal import isal_zlib

if TYPE_CHECKING:
    import zlib

from crawlfleet.errors import BodyTooLarge, DataLoss

_InflateError = cast("type[Exception]", isal_zlib.error)


def _inflater(wbits: int) -> zlib._Decompress:
    """An ISA-L decompressor: zlib's interface (``max_length``, ``unconsumed_tail``, ``eof``)."""
    return cast("zlib._Decompress", isal_zlib.decompressobj(wbits))


STEP = 64 * 1024
"""Most output one decoding step may produce; bounds the overshoot past the cap."""

# RFC 8878 §3.1.1.1.2: HTTP zstd decoders may limit the window to 8 MiB, which bounds memory.
_ZSTD_MAX_WINDOW = 8 * 1024 * 1024


class StageDecoder(Protocol):
    """One content-coding, decoded incrementally."""

    produced: int

    def feed(self, data: bytes) -> bytes:
        """Decode ``data``; raise ``BodyTooLarge`` once total output passes the cap."""

    def take(self) -> bytes:
        """Output produced but not returned (what a ``feed`` that raised had decoded)."""

    def finish(self) -> bytes:
        """Flush what is buffered; raise ``DataLoss`` if the stream is truncated."""


class _Budget:
    """Counts a stage's output against the cap."""

    __slots__ = ("_pending", "cap", "produced")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.produced = 0
        self._pending: list[bytes] = []

    def step(self) -> int:
        # +1 so that output of exactly ``cap`` bytes is distinguishable from more.
        return max(1, min(STEP, self.cap - self.produced + 1))

    def count(self, out: bytes) -> None:
        self._pending.append(out)
        self.produced += len(out)
        if self.produced > self.cap:
            raise BodyTooLarge(
                f"decoded body exceeds {self.cap} bytes", limit=self.cap, seen=self.produced
            )

    def take(self) -> bytes:
        pending, self._pending = self._pending, []
        return pending[0] if len(pending) == 1 else b"".join(pending)


class ZlibDecoder(_Budget):
    """gzip (``wbits=31``), zlib-wrapped deflate, or raw deflate (sniffed: servers send both)."""

    __slots__ = ("_buffer", "_gzip", "_zlib")

    def __init__(self, cap: int, *, gzip: bool) -> None:
        super().__init__(cap)
        self._gzip = gzip
        self._zlib: zlib._Decompress | None = _inflater(31) if gzip else None
        self._buffer = b""

    def feed(self, data: bytes) -> bytes:
        if self._zlib is None:
            # "deflate" should be zlib-wrapped (RFC 9110) but is often raw; decide on 2 bytes.
            self._buffer += data
            if len(self._buffer) < 2:
                return b""
            data, self._buffer = self._buffer, b""
            self._zlib = _inflater(15 if _is_zlib_header(data) else -15)
        return self._inflate(data)

    def _inflate(self, data: bytes) -> bytes:
        assert self._zlib is not None
        try:
            while True:
                step = self.step()
                out = self._zlib.decompress(data, step)
                self.count(out)
                data = self._zlib.unconsumed_tail
                if self._zlib.eof:
                    if not (self._gzip and self._zlib.unused_data):
                        break
                    # A gzip body may hold several members (RFC 1952 §2.2).
                    data = self._zlib.unused_data
                    self._zlib = _inflater(31)
                elif not data and len(out) < step:
                    # ISA-L may hold input it has taken but not yet inflated: a full step
                    # asks again even when no input is left.
                    break
        except _InflateError as exc:
            raise DataLoss(f"corrupt compressed body: {exc}") from exc
        return self.take()

    def finish(self) -> bytes:
        if self._zlib is None or not self._zlib.eof:
            raise DataLoss("compressed body ends before the end of its stream")
        return b""


def _is_zlib_header(data: bytes) -> bool:
    return data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0


class BrotliDecoder(_Budget):
    __slots__ = ("_brotli",)

    def __init__(self, cap: int) -> None:
        super().__init__(cap)
        self._brotli = brotli.Decompressor()

    def feed(self, data: bytes) -> bytes:
        try:
            out = self._brotli.process(data, output_buffer_limit=self.step())
            # With a limit, brotli keeps output pending; drain it in bounded steps.
            while out:
                self.count(out)
                out = self._brotli.process(b"", output_buffer_limit=self.step())
        except brotli.error as exc:
            raise DataLoss(f"corrupt brotli body: {exc}") from exc
        return self.take()

    def finish(self) -> bytes:
        if not self._brotli.is_finished():
            raise DataLoss("brotli body ends before the end of its stream")
        return b""


class ZstdDecoder(_Budget):
    """zstd through ``stream_writer``: it hands output over in ``write_size`` pieces, and the
    budget raising from ``write`` aborts decoding mid-frame."""

    __slots__ = ("_writer",)

    def __init__(self, cap: int) -> None:
        super().__init__(cap)
        decompressor = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)
        self._writer = decompressor.stream_writer(
            cast(IO[bytes], self),
            write_size=max(1024, min(STEP, cap // 16)),
            write_return_read=True,
        )

    def write(self, data: bytes) -> int:
        self.count(bytes(data))
        return len(data)

    def feed(self, data: bytes) -> bytes:
        try:
            self._writer.write(data)
        except zstandard.ZstdError as exc:
            raise DataLoss(f"corrupt zstd body: {exc}") from exc
        return self.take()

    def finish(self) -> bytes:
        return b""


class IdentityDecoder(_Budget):
    __slots__ = ()

    def feed(self, data: bytes) -> bytes:
        self.count(data)
        return self.take()

    def finish(self) -> bytes:
        return b""


_IDENTITY = ("", "identity")
SUPPORTED_ENCODINGS = ("gzip", "deflate", "br", "zstd")
ACCEPT_ENCODING = ", ".join(SUPPORTED_ENCODINGS)


def make_stage(coding: str, cap: int) -> StageDecoder:
    """The decoder for one content-coding token; unknown codings raise ``DataLoss``
    (the body cannot be interpreted; a retry over another route may get a different one)."""
    if coding in ("gzip", "x-gzip"):
        return ZlibDecoder(cap, gzip=True)
    if coding == "deflate":
        return ZlibDecoder(cap, gzip=False)
    if coding == "br":
        return BrotliDecoder(cap)
    if coding == "zstd":
        return ZstdDecoder(cap)
    if coding in _IDENTITY:
        return IdentityDecoder(cap)
    raise DataLoss(f"unsupported content-encoding {coding!r}")


class BodyDecoder:
    """Decodes a body with ``Content-Encoding`` (possibly stacked, e.g. ``gzip, br``) under
    ``cap`` decoded bytes. Feed wire chunks, then call :meth:`finish` for the body.

    The bytes as received are kept too (:attr:`received`: what the WARC archives), under the
    same cap: a stream of empty gzip members decodes to nothing but is no page either.
    ``truncate=True`` keeps the first ``cap`` bytes instead of raising (``truncated`` tells).
    """

    __slots__ = (
        "_chunks",
        "_size",
        "_stages",
        "_wire",
        "cap",
        "truncate",
        "truncated",
        "wire_bytes",
    )

    def __init__(self, content_encoding: str | None, cap: int, *, truncate: bool = False) -> None:
        self.cap = cap
        self.truncate = truncate
        self.truncated = False
        self.wire_bytes = 0
        self._size = 0
        self._chunks: list[bytes] = []
        self._wire: list[bytes] = []
        self._stages: list[StageDecoder] = []
        if content_encoding:
            codings = [c.strip().lower() for c in content_encoding.split(",")]
            # Codings are listed in the order applied, so they are undone in reverse. Every
            # stage gets the same cap: a stage whose output passes it is a bomb whatever follows.
            self._stages = [make_stage(c, cap) for c in reversed(codings) if c not in _IDENTITY]

    @property
    def decoded(self) -> int:
        """Decoded bytes produced so far by the last stage (kept or not)."""
        return self._stages[-1].produced if self._stages else self._size

    @property
    def received(self) -> bytes | None:
        """The body as received, content-coding and all; None when there is no coding (the
        decoded body is the body as received)."""
        if not self._stages:
            return None
        return self._wire[0] if len(self._wire) == 1 else b"".join(self._wire)

    def feed(self, chunk: bytes) -> bool:
        """Decode one wire chunk. Returns False when truncation reached the cap (stop reading)."""
        self.wire_bytes += len(chunk)
        over = bool(self._stages) and self.wire_bytes > self.cap
        if over and self.truncate:
            chunk = chunk[: len(chunk) - (self.wire_bytes - self.cap)]
            self.wire_bytes = self.cap
        if self._stages:
            self._wire.append(chunk)
        for stage in self._stages:
            try:
                chunk = stage.feed(chunk)
            except BodyTooLarge:
                if not self.truncate:
                    raise
                chunk = stage.take()  # what it decoded up to the cap; _keep cuts it there
                self.truncated = True
        if over:  # decoded first: a bomb is named by what it decodes to
            if not self.truncate:
                seen = self.wire_bytes
                raise BodyTooLarge(
                    f"encoded body exceeds {self.cap} bytes", limit=self.cap, seen=seen
                )
            self.truncated = True
        return self._keep(chunk)

    def _keep(self, data: bytes) -> bool:
        room = self.cap - self._size
        if len(data) > room:
            if not self.truncate:
                seen = self._size + len(data)
                raise BodyTooLarge(f"body exceeds {self.cap} bytes", limit=self.cap, seen=seen)
            data = data[:room]
            self.truncated = True
        if data:
            self._chunks.append(data)
            self._size += len(data)
        return not self.truncated

    def finish(self) -> bytes:
        """The decoded body; raises ``DataLoss`` if a compressed stream was cut short."""
        # An empty body (HEAD, 204, 304) may still carry the Content-Encoding header.
        if not self.truncated and self.wire_bytes:
            tail = b""
            for stage in self._stages:
                tail = stage.feed(tail) + stage.finish() if tail else stage.finish()
            self._keep(tail)
        if len(self._chunks) == 1:
            return self._chunks[0]
        return b"".join(self._chunks)
