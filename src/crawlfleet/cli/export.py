"""``crawlfleet export``: a job's records (or its quarantine) to a file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import click

from crawlfleet.cli.common import async_command, fail, one_job, opened, queue_option, settings

if TYPE_CHECKING:
    from crawlfleet.data.export import Format
    from crawlfleet.frontier.ports import Insights

FORMATS = ("jsonl", "json", "csv", "parquet")


@click.command()
@queue_option
@click.option("--job", help="Job to export (needed when the store has several).")
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), help="Default: from the file's extension."
)
@click.option(
    "-o", "--output", required=True, metavar="FILE", help="Where to write (- for stdout)."
)
@click.option("--quarantine", is_flag=True, help="Export the quarantined records instead.")
@click.option(
    "--provenance",
    is_flag=True,
    help="Add _url, _fetched_at, _warc_file, _warc_record_id, and for pages archived as WARC "
    "revisits _warc_refers_to_file, _warc_refers_to (the first capture, holding the bytes).",
)
@click.pass_context
@async_command
async def export(
    ctx: click.Context,
    queue: str | None,
    job: str | None,
    fmt: str | None,
    output: str,
    quarantine: bool,
    provenance: bool,
) -> None:
    """Write a job's records to FILE: JSON lines (.jsonl), one JSON array (.json), CSV or
    Parquet. All or nothing: the file appears complete or not at all. ``-o -`` writes to
    stdout (JSON lines, or --format json/csv)."""
    from crawlfleet.data.feeds import STDOUT, check_writable, feed_format

    s = settings(ctx, {"queue": queue})
    chosen = feed_format(output, fmt)
    if output == STDOUT:
        if chosen == "parquet":
            fail("-o - writes JSON lines, JSON or CSV, not Parquet")
    else:
        check_writable(output)
    async with opened(s, create=False) as store:
        name = await one_job(store, job)
        n = await export_job(store, name, output, chosen, quarantine, provenance)
    what = "quarantined records" if quarantine else "records"
    where = "stdout" if output == STDOUT else output
    click.echo(f"{n} {what} of {name} → {where}", err=True)


async def export_job(
    store: Insights, job: str, output: str, fmt: str, quarantine: bool, provenance: bool
) -> int:
    import asyncio

    from crawlfleet.data.export import export_records

    source = store.iter_quarantine(job) if quarantine else store.iter_records(job)
    rows: list[Any] = []
    with _Reading(job) as reading:
        async for row in source:
            rows.append(row)
            reading.count(len(rows))
    fmt_ = cast("Format", fmt)  # one of FORMATS: click checked it, or feed_format chose it
    if output == "-":
        return await asyncio.to_thread(_to_stdout, rows, fmt_, provenance)
    return await asyncio.to_thread(export_records, rows, fmt_, output, provenance=provenance)


def _to_stdout(rows: list[Any], fmt: Format, provenance: bool) -> int:
    """The rows to stdout, written as the file would be (through a temporary file: the
    export's writers are file writers, and a failure then leaves stdout untouched)."""
    import os
    import shutil
    import sys
    import tempfile

    from crawlfleet.data.export import export_records

    with tempfile.TemporaryDirectory(prefix="crawlfleet-export-") as tmp:
        path = os.path.join(tmp, f"out.{fmt}")
        n = export_records(rows, fmt, path, provenance=provenance)
        with open(path, "rb") as f:
            shutil.copyfileobj(f, sys.stdout.buffer)
    sys.stdout.buffer.flush()
    return n


class _Reading:
    """A live count of the rows read, on a terminal (long exports show they move)."""

    def __init__(self, job: str) -> None:
        import sys

        from rich.console import Console
        from rich.status import Status

        self.status = Status(f"reading {job}", console=Console(stderr=True))
        self.tty = sys.stderr.isatty()
        self.job = job

    def __enter__(self) -> _Reading:
        if self.tty:
            self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.tty:
            self.status.stop()

    def count(self, n: int) -> None:
        if self.tty and n % 1000 == 0:
            self.status.update(f"reading {self.job}: {n:,} rows")
