"""The ``crawlfleet`` command: one click group, a small module per command.

Thin: each command parses its flags and calls the layer that does the work. Every error a user
can cause ends as one line on stderr and exit code 2, never a traceback. Command modules are
imported when their command runs (``--help`` imports them all, for their summaries), and they
import the heavy layers inside their functions: start-up is part of the loop a user iterates in.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any

import click

from crawlfleet.cli.common import Options

__all__ = ["main"]

#: command name -> "module:attribute", in the order ``--help`` lists them
COMMANDS = {
    "demo": "crawlfleet.cli.demo:demo",
    "crawl": "crawlfleet.cli.crawl:crawl",
    "new": "crawlfleet.cli.new:new",
    "parse": "crawlfleet.cli.parse:parse",
    "fetch": "crawlfleet.cli.fetch:fetch",
    "shell": "crawlfleet.cli.shell:shell",
    "submit": "crawlfleet.cli.submit:submit",
    "worker": "crawlfleet.cli.worker:worker",
    "status": "crawlfleet.cli.status:status",
    "serve": "crawlfleet.cli.serve:serve",
    "jobs": "crawlfleet.cli.jobs:jobs",
    "schedule": "crawlfleet.cli.schedule:schedule",
    "export": "crawlfleet.cli.export:export",
    "dead": "crawlfleet.cli.dead:dead",
    "quality": "crawlfleet.cli.quality:quality",
    "notify": "crawlfleet.cli.notify:notify",
    "db": "crawlfleet.cli.db:db",
    "warc": "crawlfleet.cli.warc:warc",
    "plan": "crawlfleet.cli.plan:plan",
}


class LazyGroup(click.Group):
    """A group whose commands are imported when used (click's documented lazy-loading way)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        # an unknown command names the nearest one, like a bad key in crawlfleet.toml
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            import difflib

            close = difflib.get_close_matches(name, list(COMMANDS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            ctx.fail(f"no such command {name!r}{hint}")
        return super().resolve_command(ctx, args)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option("--config", type=click.Path(dir_okay=False), help="crawlfleet.toml to read.")
@click.option("-v", "--verbose", count=True, help="More log output: -v info, -vv debug.")
@click.option("-q", "--quiet", count=True, help="Less: -q no progress display, -qq no summary.")
@click.version_option(package_name="crawlfleet")
@click.pass_context
def main(ctx: click.Context, config: str | None, verbose: int, quiet: int) -> None:
    """crawlfleet: write a spider once, crawl on a laptop (SQLite) or a fleet (PostgreSQL).

    \b
    Quick start:
      crawlfleet demo                          crawl the bundled demo shop end to end
      crawlfleet new shop https://shop.example/   a spider file to start from
      crawlfleet parse https://shop.example/p/1 --spider shop.py   one page through it
      crawlfleet crawl shop.py --workers 2 -o records.jsonl
      crawlfleet export --format csv -o records.csv

    \b
    A fleet (one PostgreSQL, workers on any number of machines):
      crawlfleet db upgrade --queue postgresql://db/crawl
      crawlfleet submit spider.py --queue postgresql://db/crawl
      crawlfleet worker --queue postgresql://db/crawl --spiders ./spiders   (on every machine)
      crawlfleet status --queue postgresql://db/crawl --watch
    """
    options = Options(config=config, verbose=verbose, quiet=quiet)
    ctx.obj = options
    logging.basicConfig(
        level=options.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _main_entry(**kwargs: Any) -> None:  # pragma: no cover - the console script
    main(prog_name=os.path.basename(sys.argv[0]) or "crawlfleet", **kwargs)
