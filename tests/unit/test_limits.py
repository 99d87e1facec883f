"""Streaming decoders: exact caps, bombs stopped early, truncated streams detected."""

from __future__ import annotations

import pytest
from tests.sites.hostile import BOMB_SIZE, bomb, encode, page_bytes

from crawlfleet.errors import BodyTooLarge, DataLoss
from crawlfleet.fetch.limits import BodyDecoder

ENCODINGS = ["gzip", "deflate", "rawdeflate", "br", "zstd"]


def header(encoding: str) -> str:
    return "deflate" if encoding == "rawdeflate" else encoding


def decode(data: bytes, encoding: str | None, cap: int, piece: int = 1000) -> bytes:
    decoder = BodyDecoder(encoding, cap)
    for start in range(0, len(data), piece):
        decoder.feed(data[start : start + piece])
    return decoder.finish()


@pytest.mark.parametrize("encoding", [*ENCODINGS, "identity", None])
def test_exactly_cap_passes_and_one_more_fails(encoding: str | None) -> None:
    body = page_bytes(50_000)
    wire = encode(body, encoding) if encoding in ENCODINGS else body
    coding = header(encoding) if encoding else None
    assert decode(wire, coding, cap=50_000) == body
    with pytest.raises(BodyTooLarge) as info:
        decode(wire, coding, cap=49_999)
    assert info.value.limit == 49_999


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_bomb_stops_before_one_point_one_times_cap(encoding: str) -> None:
    cap = 1_000_000
    wire = bomb(encoding)
    assert len(wire) < 64 * 1024  # the whole bomb fits in one read
    decoder = BodyDecoder(header(encoding), cap)
    with pytest.raises(BodyTooLarge) as info:
        decoder.feed(wire)
    assert cap < info.value.seen <= 1.1 * cap
    assert decoder.decoded <= 1.1 * cap < BOMB_SIZE


def test_small_cap_overshoot_is_bounded_too() -> None:
    with pytest.raises(BodyTooLarge) as info:
        BodyDecoder("gzip", 1000).feed(bomb("gzip"))
    assert info.value.seen == 1001


def test_stacked_encodings_are_undone_in_reverse() -> None:
    body = page_bytes(20_000)
    wire = encode(encode(body, "gzip"), "br")
    assert decode(wire, "gzip, br", cap=20_000) == body


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
def test_truncated_stream_is_data_loss(encoding: str) -> None:
    wire = encode(page_bytes(100_000), encoding)
    with pytest.raises(DataLoss):
        decode(wire[: len(wire) // 2], encoding, cap=1_000_000)


def test_corrupt_stream_is_data_loss() -> None:
    with pytest.raises(DataLoss):
        decode(b"\x1f\x8b" + b"garbage" * 10, "gzip", cap=1000)


def test_unknown_encoding_is_data_loss() -> None:
    with pytest.raises(DataLoss):
        BodyDecoder("compress", 1000)


def test_empty_body_with_encoding_header_is_empty() -> None:
    assert BodyDecoder("gzip", 1000).finish() == b""


def test_truncate_keeps_the_first_cap_bytes() -> None:
    body = page_bytes(10_000)
    decoder = BodyDecoder("gzip", 4_000, truncate=True)
    assert decoder.feed(encode(body, "gzip")) is False
    assert decoder.finish() == body[:4_000]
    assert decoder.truncated


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "rawdeflate"])
def test_small_input_inflating_to_many_steps_is_decoded_whole(encoding: str) -> None:
    # 300 KB of repeats compress to a few hundred bytes: one feed takes them all, and the
    # inflater holds what it has taken beyond one step's output (no input left to hand it).
    body = b"<li><a href='/p/1'>product</a></li>\n" * 8_000
    wire = encode(body, encoding)
    assert len(wire) < 4_000
    assert decode(wire, header(encoding), cap=len(body), piece=len(wire)) == body
    with pytest.raises(BodyTooLarge):
        decode(wire, header(encoding), cap=len(body) - 1, piece=len(wire))


def test_gzip_members_after_a_small_one_are_decoded() -> None:
    first, second = page_bytes(100), b"x" * 200_000
    wire = encode(first, "gzip") + encode(second, "gzip")
    assert decode(wire, "gzip", cap=200_100, piece=len(wire)) == first + second


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_body_as_received_is_kept_beside_the_decoded_one(encoding: str) -> None:
    body = page_bytes(20_000)
    wire = encode(body, encoding)
    decoder = BodyDecoder(header(encoding), cap=50_000)
    for start in range(0, len(wire), 700):
        decoder.feed(wire[start : start + 700])
    assert decoder.finish() == body
    assert decoder.received == wire  # what the WARC archives, byte for byte


@pytest.mark.parametrize("encoding", ["identity", None])
def test_no_coding__no_second_copy(encoding: str | None) -> None:
    decoder = BodyDecoder(encoding, cap=100)
    decoder.feed(b"plain")
    assert decoder.finish() == b"plain" and decoder.received is None


def test_empty_gzip_members__the_bytes_received_are_capped_too() -> None:
    import gzip

    empty = gzip.compress(b"", mtime=0)  # 20 bytes that decode to nothing, again and again
    with pytest.raises(BodyTooLarge) as info:
        decode(empty * 100, "gzip", cap=1000, piece=len(empty))
    assert info.value.limit == 1000
    cut = BodyDecoder("gzip", 1000, truncate=True)
    while cut.feed(empty):
        pass
    assert cut.truncated and cut.received is not None and len(cut.received) == 1000
