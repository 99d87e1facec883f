"""A worker killed mid-file leaves a ``.open`` WARC file: the next one to start closes it under
the name its records carry, so every record's provenance names a file that exists and reads."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.chaos.harness import (
    exported_records,
    finish,
    new_store,
    reaped,
    run,
    spider_file,
    start,
    wait_for,
    warc_record_ids,
)
from tests.integration.helpers import demo_shop

pytestmark = pytest.mark.slow

JOB = "shop"


def test_kill_9_mid_file__the_next_worker_closes_it_and_every_records_warc_file_reads(
    tmp_path: Path,
) -> None:
    warc = tmp_path / "warc"
    (tmp_path / "crawlfleet.toml").write_text(
        f'[worker]\nlease_ttl = 3\nfetch_timeout = 2\n\n[store]\nraw = "{warc}"\n'
    )
    with (
        new_store("sqlite", tmp_path) as store,
        demo_shop("--products", "150", "--slow", "1.0", "--slow-delay", "0.1") as base,
    ):
        spider = spider_file(tmp_path / "shop.py", base, domain_concurrency=8)
        submitted = run(["submit", str(spider), "--queue", store.url, "--job", JOB], tmp_path)
        assert submitted.returncode == 0, submitted.stderr
        args = ["worker", "--queue", store.url, "--job", JOB, "--exit-when-finished"]
        victim = start([*args, "--worker-id", "victim"], tmp_path)
        with reaped(victim) as procs:
            wait_for(lambda: (store.value("SELECT count(*) FROM records") or 0) >= 30, 60, "30")
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            left_open = sorted(p.name for p in warc.glob("*.warc.gz.open"))
            heir = start([*args, "--worker-id", "heir"], tmp_path)
            procs.append(heir)
            err = finish(heir, 120)
        records = exported_records(store.url, JOB, tmp_path)

    assert heir.returncode == 0, err[-3000:]
    assert [n for n in left_open if "victim" in n], "the victim left no open file"
    assert "closed 1 WARC files left open by dead workers" in err, err[-3000:]
    assert not list(warc.glob("*.open"))
    files = {r["_warc_file"] for r in records}
    assert any("victim" in f for f in files), "no record of the victim's file was kept"
    ids = {name: set(warc_record_ids(warc / name)) for name in files if (warc / name).exists()}
    assert set(ids) == files, f"records name WARC files that do not exist: {files - set(ids)}"
    for r in records:
        assert r["_warc_record_id"] in ids[r["_warc_file"]]


def test_warc_recover_command__closes_what_no_writer_holds_one_line_errors(tmp_path: Path) -> None:
    from crawlfleet.data.warc import WarcRef, WarcWriter

    def page(writer: WarcWriter, url: str, body: bytes) -> WarcRef:
        ref = writer.write(
            url=url,
            method="GET",
            request_headers=[],
            status=200,
            reason="OK",
            http_version="1.1",
            response_headers=[],
            body=body,
            fetched_at=0.0,
        )
        writer.flush()
        return ref

    writer = WarcWriter(tmp_path, prefix="live")  # a live writer: its file is locked
    page(writer, "http://x.test/", b"hello")
    dead = WarcWriter(tmp_path / "dead", prefix="dead")
    ref = page(dead, "http://x.test/a", b"a page")
    opened = tmp_path / "dead" / (ref.file + ".open")
    (tmp_path / (ref.file + ".open")).write_bytes(opened.read_bytes() + b"\x1f\x8b cut off")
    try:
        result = run(["warc", "recover", str(tmp_path)], tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [str(tmp_path / ref.file)]
        assert "1 WARC files closed" in result.stderr
        assert ref.record_id in set(warc_record_ids(tmp_path / ref.file))
        assert len(list(tmp_path.glob("live-*.open"))) == 1, "the live writer's file was taken"
    finally:
        writer.close()
        dead.close()
    missing = run(["warc", "recover", str(tmp_path / "nope")], tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"error: {tmp_path / 'nope'}: no such directory"
    assert "Traceback" not in missing.stderr
