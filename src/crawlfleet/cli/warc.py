"""``crawlfleet warc``: the raw store's WARC files."""

from __future__ import annotations

from pathlib import Path

import click

from crawlfleet.cli.common import fail, settings


@click.group()
def warc() -> None:
    """The raw store's WARC files."""


@warc.command("recover")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.pass_context
def warc_recover(ctx: click.Context, directory: Path | None) -> None:
    """Close the WARC files dead workers left open (``*.warc.gz.open``) in DIRECTORY.

    Default: the raw store's directory ([store] raw), or its spool for an S3 raw store (the next
    worker that starts uploads them). Each file is cut after its last complete record and renamed
    to the name its records carry (``.warc.gz``), or to ``.warc.gz.invalid`` when no record
    survives. Files a live writer holds (an exclusive lock) are left alone: safe to run while
    workers write. Workers do this themselves when they start.
    """
    from crawlfleet.data.warc import recover

    if directory is None:
        s = settings(ctx)
        directory = Path(s.raw_spool if s.raw.startswith("s3://") else s.raw)
    if not directory.is_dir():
        fail(f"{directory}: no such directory")
    try:
        files = recover(directory)
    except OSError as exc:
        fail(f"cannot recover the WARC files in {directory}: {exc.strerror or exc}")
    for name in files:
        click.echo(name)
    click.echo(f"{len(files)} WARC files closed in {directory}", err=True)
