"""``crawlfleet export``: a job's records (or its quarantine) to a file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from crawlfleet.cli.common import async_command, one_job, opened, queue_option, settings

if TYPE_CHECKING:
    from crawlfleet.frontier.ports import Insights

FORMATS = ("jsonl", "json", "csv", "parquet")


@click.command()
@queue_option
@click.option("--job", help="Job to export (needed when the store has several).")
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), help="Default: from the file's extension."
)
@click.option("-o", "--output", required=True, metavar="FILE")
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
    Parquet. All or nothing: the file appears complete or not at all."""
    from crawlfleet.data.feeds import feed_format
    from crawlfleet.runner import _check_writable

    s = settings(ctx, {"queue": queue})
    _check_writable(output)
    async with opened(s, create=False) as store:
        name = await one_job(store, job)
        n = await export_job(store, name, output, feed_format(output, fmt), quarantine, provenance)
    what = "quarantined records" if quarantine else "records"
    click.echo(f"{n} {what} of {name} → {output}", err=True)


async def export_job(
    store: Insights, job: str, output: str, fmt: str, quarantine: bool, provenance: bool
) -> int:
    import asyncio

    from crawlfleet.data.export import export_records

    rows: list[Any]
    if quarantine:
        rows = [q async for q in store.iter_quarantine(job)]
    else:
        rows = [r async for r in store.iter_records(job)]
    return await asyncio.to_thread(export_records, rows, fmt, output, provenance=provenance)  # type: ignore[arg-type]
