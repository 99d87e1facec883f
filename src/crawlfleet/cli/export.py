"""``crawlfleet export``: a job's records (or its quarantine) to a file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import click

from crawlfleet.cli.common import async_command, fail, one_job, opened, queue_option, settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

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
@click.option(
    "--changes",
    is_flag=True,
    help="Only the records of the latest run that are new, changed or removed, with _change "
    "(new, changed, removed), and for changed ones _changed_fields and _previous (their old "
    "values); a removed record with its last values.",
)
@click.option(
    "--since",
    type=click.IntRange(1),
    metavar="RUN",
    help="With --changes (implied): the changes of runs RUN to the latest, against the records "
    "as they were before run RUN.",
)
@click.option(
    "--removed",
    is_flag=True,
    help="Add the removed records (with their last values) to the current ones, and a "
    "_removed_in column: the run that removed each (empty for a current record).",
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
    changes: bool,
    since: int | None,
    removed: bool,
) -> None:
    """Write a job's records to FILE: JSON lines (.jsonl), one JSON array (.json), CSV or
    Parquet. All or nothing: the file appears complete or not at all. ``-o -`` writes to
    stdout (JSON lines, or --format json/csv).

    The current records by default (removed ones with --removed); --changes: what the latest
    run changed (--since RUN: what runs RUN.. changed)."""
    from crawlfleet.data.feeds import STDOUT, check_writable, feed_format
    from crawlfleet.errors import UsageError

    changes = changes or since is not None
    if quarantine and (changes or removed):
        raise UsageError("--quarantine exports the quarantine: not with --changes or --removed")
    if changes and removed:
        raise UsageError("--changes has the removed records already: not with --removed")
    s = settings(ctx, {"queue": queue})
    chosen = feed_format(output, fmt)
    if output == STDOUT:
        if chosen == "parquet":
            fail("-o - writes JSON lines, JSON or CSV, not Parquet")
    else:
        check_writable(output)
    async with opened(s, create=False) as store:
        name = await one_job(store, job)
        if since is not None:
            current = await store.current_run(name)
            if current is not None and since > current.run:
                raise UsageError(f"job {name} has runs 1 to {current.run}: no run {since}")
        source = _source(store, name, quarantine, changes, since, removed)
        n = await export_job(store, name, output, chosen, source, provenance)
    what = "quarantined records" if quarantine else "changed records" if changes else "records"
    where = "stdout" if output == STDOUT else output
    click.echo(f"{n} {what} of {name} → {where}", err=True)


async def _source(
    store: Insights,
    job: str,
    quarantine: bool,
    changes: bool,
    since: int | None,
    removed: bool,
) -> AsyncIterator[Any]:
    """The rows to export: records (their data with the change or removal columns added)."""
    from dataclasses import replace

    if quarantine:
        async for q in store.iter_quarantine(job):
            yield q
    elif changes:
        async for record, change in store.iter_changes(job, since):
            columns = change.columns()
            if columns is not None:
                yield replace(record, data=columns)
    elif removed:
        async for record, _status, removed_in in store.iter_all_records(job):
            yield replace(record, data={**record.data, "_removed_in": removed_in})
    else:
        async for r in store.iter_records(job):
            yield r


async def export_job(
    store: Insights,
    job: str,
    output: str,
    fmt: str,
    source: AsyncIterator[Any] | None = None,
    provenance: bool = False,
) -> int:
    import asyncio

    from crawlfleet.data.export import export_records

    if source is None:
        source = store.iter_records(job)
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
