"""WarcWriter output read back with warcio: records, bodies, digests, masking, rolling, recovery."""

from __future__ import annotations

import gzip
import os
import re
import zlib
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawlfleet.data.warc import (
    NOT_MODIFIED_PROFILE,
    REVISIT_PROFILE,
    Capture,
    WarcRef,
    WarcWriter,
    mask_form_secrets,
    recover,
)

SECRETS = ("Bearer-tok3n-XYZ", "proxy-pw-5678", "sid=cookie-secret-42", "url-passw0rd")
FETCHED_AT = 1_714_564_800.123456


def exchange(n: int, **overrides: Any) -> dict[str, Any]:
    """Keyword arguments for one ``write``: HTML, binary or gzip-encoded, some with credentials."""
    kind = n % 3
    body = (
        bytes(range(256)) * (n + 1)
        if kind == 1
        else f"<html><body>page {n} é</body></html>".encode() * (n + 1)
    )
    response_headers = [("Content-Type", "application/octet-stream" if kind == 1 else "text/html")]
    if kind == 2:
        response_headers += [("Content-Encoding", "gzip"), ("Content-Length", "17")]
    request_headers = [("Host", "shop.example"), ("User-Agent", "crawlfleet-test")]
    url = f"https://shop.example/item/{n}?q=1"
    if n % 2 == 0:
        request_headers += [
            ("Authorization", SECRETS[0]),
            ("proxy-authorization", "Basic " + SECRETS[1]),
            ("Cookie", SECRETS[2]),
        ]
        url = f"https://alice:{SECRETS[3]}@shop.example/item/{n}?q=1"
    args: dict[str, Any] = {
        "url": url,
        "method": "GET",
        "request_headers": request_headers,
        "status": 200,
        "reason": "OK",
        "http_version": "HTTP/1.1",
        "response_headers": response_headers,
        "body": body,
        "fetched_at": FETCHED_AT + n,
        "ip": "192.0.2.7",
    }
    args.update(overrides)
    return args


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every record of a WARC file, with digests checked (a mismatch raises)."""
    records = []
    with open(path, "rb") as handle:
        for record in ArchiveIterator(handle, check_digests="raise"):
            records.append(
                {
                    "type": record.rec_type,
                    "headers": dict(record.rec_headers.headers),
                    "http": record.http_headers,
                    "body": record.content_stream().read(),
                    "digests_ok": record.digest_checker.passed,
                }
            )
    return records


def all_records(directory: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.warc.gz")):
        records.extend(read_records(path))
    return records


def test_round_trip_through_warcio(tmp_path: Path) -> None:
    count = 12
    with WarcWriter(tmp_path, prefix="w1") as writer:
        refs = [writer.write(**exchange(n)) for n in range(count)]

    (path,) = tmp_path.glob("*.warc.gz")
    assert {ref.file for ref in refs} == {path.name}
    records = read_records(path)
    assert [r["type"] for r in records].count("warcinfo") == 1
    assert records[0]["type"] == "warcinfo"
    responses = [r for r in records if r["type"] == "response"]
    requests = [r for r in records if r["type"] == "request"]
    assert len(responses) == len(requests) == count
    for n, (ref, request, response) in enumerate(zip(refs, requests, responses, strict=True)):
        expected = exchange(n)
        assert response["headers"]["WARC-Record-ID"] == ref.record_id
        assert response["headers"]["WARC-Concurrent-To"] == request["headers"]["WARC-Record-ID"]
        assert request["headers"]["WARC-Concurrent-To"] == ref.record_id
        assert response["headers"]["WARC-Target-URI"].endswith(f"shop.example/item/{n}?q=1")
        assert response["headers"]["WARC-IP-Address"] == "192.0.2.7"
        assert response["http"].get_statuscode() == "200"
        assert response["body"] == expected["body"]
        assert response["http"]["Content-Length"] == str(len(expected["body"]))
        assert request["http"].protocol == "GET"
        assert all(r["digests_ok"] for r in (request, response))


def test_record_headers(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, prefix="w1") as writer:
        ref = writer.write(**exchange(2))
    records = read_records(tmp_path / ref.file)
    response = records[-1]["headers"]
    assert records[0]["headers"]["WARC-Filename"] == ref.file
    assert response["WARC-Warcinfo-ID"] == records[0]["headers"]["WARC-Record-ID"]
    assert response["WARC-Date"] == "2024-05-01T12:00:02.123456Z"
    assert response["Content-Type"] == "application/http; msgtype=response"
    assert re.fullmatch(r"sha1:[A-Z2-7]{32}", response["WARC-Payload-Digest"])
    assert re.fullmatch(r"sha1:[A-Z2-7]{32}", response["WARC-Block-Digest"])
    assert re.fullmatch(r"<urn:uuid:[0-9a-f-]{36}>", ref.record_id)


def test_encoding_headers_rewritten_for_identity_body(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, prefix="w1") as writer:
        ref = writer.write(**exchange(2))  # gzip Content-Encoding, stale Content-Length
    http = read_records(tmp_path / ref.file)[-1]["http"]
    assert http.get_header("Content-Encoding") is None
    assert http.get_header("X-Crawlfleet-Original-Content-Encoding") == "gzip"
    assert http.get_header("X-Crawlfleet-Original-Content-Length") == "17"
    assert http.get_header("Content-Length") == str(len(exchange(2)["body"]))


def test_chunked_response_and_request_body(tmp_path: Path) -> None:
    args = exchange(
        1,
        method="post",
        request_body=b"a=1&b=2",
        response_headers=[("Transfer-Encoding", "chunked")],
    )
    with WarcWriter(tmp_path, prefix="w1") as writer:
        ref = writer.write(**args)
    _, request, response = read_records(tmp_path / ref.file)
    assert request["body"] == b"a=1&b=2"
    assert request["http"].protocol == "POST"
    assert response["body"] == args["body"]
    assert response["http"].get_header("X-Crawlfleet-Original-Transfer-Encoding") == "chunked"


def test_no_secret_in_file_bytes(tmp_path: Path) -> None:
    args = exchange(0, response_headers=[("Set-Cookie", "session=srv-secret-99; Path=/")])
    with WarcWriter(tmp_path, prefix="w1") as writer:
        ref = writer.write(**args)
        writer.write(**exchange(2))
    text = gzip.decompress((tmp_path / ref.file).read_bytes())
    for secret in (*SECRETS, "srv-secret-99"):
        assert secret.encode() not in text
    assert b"Authorization: [secure]\r\n" in text
    assert b"Cookie: [secure]\r\n" in text
    assert b"Set-Cookie: [secure]\r\n" in text
    assert b"WARC-Target-URI: https://alice:[secure]@shop.example/item/0?q=1\r\n" in text


def test_header_injection_is_flattened(tmp_path: Path) -> None:
    args = exchange(1, response_headers=[("X-Evil", "a\r\nWARC-Type: revisit")])
    with WarcWriter(tmp_path, prefix="w1") as writer:
        ref = writer.write(**args)
    response = read_records(tmp_path / ref.file)[-1]
    assert response["http"].get_header("X-Evil") == "a  WARC-Type: revisit"
    assert response["body"] == args["body"]


def test_each_record_is_its_own_gzip_member(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, prefix="w1") as writer:
        ref = writer.write(**exchange(1))
    data = (tmp_path / ref.file).read_bytes()
    members = 0
    while data:
        inflater = zlib.decompressobj(31)
        assert inflater.decompress(data).startswith(b"WARC/1.1\r\n")
        data = inflater.unused_data
        members += 1
    assert members == 3  # warcinfo, request, response


def test_rolls_by_size_and_leaves_no_open_file(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, prefix="w1", max_size=20_000, fsync=False) as writer:
        refs = [writer.write(**exchange(n % 9, body=os.urandom(6_000))) for n in range(20)]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) >= 4
    assert all(re.fullmatch(r"w1-\d{14}-\d{5}\.warc\.gz", name) for name in files)
    assert {ref.file for ref in refs} == set(files)
    seen = {}
    for name in files:
        records = read_records(tmp_path / name)
        assert records[0]["type"] == "warcinfo"
        for record in records:
            if record["type"] == "response":
                seen[record["headers"]["WARC-Record-ID"]] = name
    assert seen == {ref.record_id: ref.file for ref in refs}  # each ref names its real file


def test_open_suffix_while_writing_and_flush_makes_it_readable(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, prefix="w1")
    try:
        ref = writer.write(**exchange(1))
        writer.flush()
        (path,) = tmp_path.iterdir()
        assert path.name == ref.file + ".open"
        assert len(read_records(path)) == 3
    finally:
        writer.close()
    assert [p.name for p in tmp_path.iterdir()] == [ref.file]


def test_nothing_written_makes_no_file(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, prefix="w1") as writer:
        writer.flush()
    assert list(tmp_path.iterdir()) == []


def test_write_after_close_raises(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, prefix="w1")
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        writer.write(**exchange(1))


def test_thread_error_reaches_the_caller(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    writer = WarcWriter(missing, prefix="w1")
    missing.rmdir()  # the directory disappears under a running writer
    writer.write(**exchange(1))
    with pytest.raises(FileNotFoundError):
        writer.flush()
    with pytest.raises(FileNotFoundError):
        writer.close()


def test_recover_truncates_mid_record(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, prefix="w1")
    try:
        refs = [writer.write(**exchange(n)) for n in range(5)]
        writer.flush()
        (path,) = tmp_path.iterdir()
        data = path.read_bytes()
    finally:
        writer.close()
    crashed = tmp_path / "w1-20240101000000-00007.warc.gz.open"
    crashed.write_bytes(data[: len(data) - 40])  # the last response is cut mid-member
    (tmp_path / refs[0].file).unlink()

    assert recover(tmp_path) == [str(tmp_path / "w1-20240101000000-00007.warc.gz")]
    records = read_records(tmp_path / "w1-20240101000000-00007.warc.gz")
    ids = [r["headers"]["WARC-Record-ID"] for r in records if r["type"] == "response"]
    assert ids == [ref.record_id for ref in refs[:4]]
    assert records[-1]["type"] == "request"  # the last request survived, its response did not
    assert not list(tmp_path.glob("*.open"))


def test_recover_marks_unreadable_file_invalid(tmp_path: Path) -> None:
    (tmp_path / "w1-20240101000000-00000.warc.gz.open").write_bytes(b"\x1f\x8b\x08garbage")
    (tmp_path / "w2-20240101000000-00000.warc.gz.open").write_bytes(b"")
    assert recover(tmp_path, prefix="w1") == [
        str(tmp_path / "w1-20240101000000-00000.warc.gz.invalid")
    ]
    assert (tmp_path / "w2-20240101000000-00000.warc.gz.open").exists()  # not ours: untouched


def test_recover_keeps_complete_file_whole(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, prefix="w1") as writer:
        ref = writer.write(**exchange(1))
    data = (tmp_path / ref.file).read_bytes()
    (tmp_path / ref.file).rename(tmp_path / (ref.file + ".open"))
    assert recover(tmp_path) == [str(tmp_path / ref.file)]
    assert (tmp_path / ref.file).read_bytes() == data


def test_warc_ref_is_a_value() -> None:
    assert WarcRef("a.warc.gz", "<urn:uuid:x>") == WarcRef("a.warc.gz", "<urn:uuid:x>")


def test_bad_prefix_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="prefix"):
        WarcWriter(tmp_path, prefix="a/b")


def test_revisit_record_refers_to_the_first_capture(tmp_path: Path) -> None:
    body = b"<html><body>the same page under two URLs</body></html>" * 50
    first = exchange(1, body=body, url="https://a.example/p")
    with WarcWriter(tmp_path, prefix="w1") as writer:
        ref = writer.write(**first)
        original = Capture("w1.warc.gz", ref.record_id, ref.target_uri, ref.date)
        again = writer.write(
            **exchange(3, body=body, url="https://b.example/p"), revisit_of=original
        )
    assert (ref.revisit, again.revisit) == (False, True)
    assert (ref.target_uri, ref.date) == ("https://a.example/p", "2024-05-01T12:00:01.123456Z")

    response, revisit = (r for r in all_records(tmp_path) if r["type"] in ("response", "revisit"))
    assert revisit["type"] == "revisit"
    h = revisit["headers"]
    assert h["WARC-Record-ID"] == again.record_id
    assert h["WARC-Profile"] == REVISIT_PROFILE
    assert h["WARC-Refers-To"] == ref.record_id == response["headers"]["WARC-Record-ID"]
    assert h["WARC-Refers-To-Target-URI"] == "https://a.example/p"
    assert h["WARC-Refers-To-Date"] == response["headers"]["WARC-Date"]
    assert h["WARC-Target-URI"] == "https://b.example/p"
    # identical payload: the same digest, and the bytes are not stored a second time
    assert h["WARC-Payload-Digest"] == response["headers"]["WARC-Payload-Digest"]
    assert revisit["body"] == b"" and response["body"] == body
    assert revisit["http"].get_statuscode() == "200"
    assert revisit["digests_ok"] is not False


def test_a_304_is_a_server_not_modified_revisit_of_the_last_capture(tmp_path: Path) -> None:
    body = b"<html><body>a page that did not change</body></html>" * 50
    with WarcWriter(tmp_path, prefix="w1") as writer:
        ref = writer.write(**exchange(1, body=body, url="https://a.example/p"))
        original = Capture("w1.warc.gz", ref.record_id, ref.target_uri, ref.date)
        headers = [("ETag", '"v1"'), ("Date", "Wed, 01 May 2024 12:00:04 GMT")]
        again = writer.write(
            **{
                **exchange(4, url="https://a.example/p"),
                "status": 304,
                "reason": "Not Modified",
                "response_headers": headers,
                "body": b"",
            },
            revisit_of=original,
            not_modified=True,
        )
        unknown = writer.write(
            **{**exchange(5, url="https://a.example/q"), "status": 304, "body": b""},
            not_modified=True,
        )
    assert again.revisit and unknown.revisit
    records = [r for r in all_records(tmp_path) if r["type"] in ("response", "revisit")]
    response, revisit, lone = records
    h = revisit["headers"]
    assert h["WARC-Profile"] == NOT_MODIFIED_PROFILE
    assert h["WARC-Refers-To"] == response["headers"]["WARC-Record-ID"]
    assert h["WARC-Refers-To-Target-URI"] == "https://a.example/p"
    assert h["WARC-Refers-To-Date"] == response["headers"]["WARC-Date"]
    assert "WARC-Payload-Digest" not in h  # a 304 has no payload
    assert revisit["http"].get_statuscode() == "304"
    assert revisit["http"].get_header("ETag") == '"v1"'
    assert revisit["digests_ok"] is not False
    assert lone["headers"]["WARC-Profile"] == NOT_MODIFIED_PROFILE
    assert "WARC-Refers-To" not in lone["headers"]


def test_payload_digest_given_by_the_caller_is_the_one_written(tmp_path: Path) -> None:
    import hashlib

    body = b"<html>given digest</html>"
    with WarcWriter(tmp_path, prefix="w1") as writer:
        writer.write(**exchange(1, body=body), payload_sha1=hashlib.sha1(body).digest())
    (response,) = (r for r in all_records(tmp_path) if r["type"] == "response")
    assert response["digests_ok"] is not False  # warcio checked it against the body
    assert response["body"] == body


def test_a_body_as_received__stored_coded_with_its_headers_and_digest(tmp_path: Path) -> None:
    import base64
    import hashlib

    page = b"<html>" + b"as received " * 100 + b"</html>"
    coded = gzip.compress(page, mtime=0)
    headers = [
        ("Content-Type", "text/html"),
        ("Content-Encoding", "gzip"),
        ("Transfer-Encoding", "chunked"),
    ]
    with WarcWriter(tmp_path, prefix="w1") as writer:
        args = exchange(1, body=page, response_headers=headers)
        writer.write(**args, as_received=coded)
    (response,) = (r for r in all_records(tmp_path) if r["type"] == "response")
    assert response["digests_ok"] is not False
    http = response["http"]
    assert http.get_header("Content-Encoding") == "gzip"  # as sent: the body is still gzip
    assert http.get_header("Content-Length") == str(len(coded))
    assert http.get_header("Transfer-Encoding") is None  # stored de-chunked
    assert http.get_header("X-Crawlfleet-Original-Transfer-Encoding") == "chunked"
    sha1 = base64.b32encode(hashlib.sha1(coded).digest()).decode()
    assert response["headers"]["WARC-Payload-Digest"] == f"sha1:{sha1}"
    assert response["body"] == page  # warcio decodes on read


def test_a_truncated_body_says_so(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, prefix="w1") as writer:
        writer.write(**exchange(1, body=b"cut her"), truncated=True)
    request, response = (r for r in all_records(tmp_path) if r["type"] != "warcinfo")
    assert response["headers"]["WARC-Truncated"] == "length"
    assert "WARC-Truncated" not in request["headers"]


FORM = [("Content-Type", "application/x-www-form-urlencoded")]


@pytest.mark.parametrize(
    ("body", "headers", "masked"),
    [
        (b"user=ann&password=s3cret&csrf=t0k", FORM, b"user=ann&password=[secure]&csrf=t0k"),
        (
            b"ctl00%24Main%24txtPassword=x&a=%C3%A9",
            FORM,
            b"ctl00%24Main%24txtPassword=[secure]&a=%C3%A9",
        ),
        (
            b"pwd=1&client_secret=2&passwd=3",
            FORM,
            b"pwd=[secure]&client_secret=[secure]&passwd=[secure]",
        ),
        (b"user=ann&remember", FORM, b"user=ann&remember"),
        (b"password=s3cret", [("Content-Type", "application/json")], b"password=s3cret"),
        (b"", FORM, b""),
    ],
)
def test_mask_form_secrets(body: bytes, headers: list[tuple[str, str]], masked: bytes) -> None:
    assert mask_form_secrets(body, headers) == masked


def test_record_ids__are_distinct_version_4_uuids() -> None:
    import uuid

    from crawlfleet.data.warc import _record_id

    ids = [_record_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    for rid in ids[:2000]:
        assert rid.startswith("<urn:uuid:") and rid.endswith(">")
        u = uuid.UUID(rid[10:-1])
        assert (u.version, u.variant, str(u)) == (4, uuid.RFC_4122, rid[10:-1])
