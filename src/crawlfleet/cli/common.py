"""What the commands share: global options, settings, the store, and errors as one line.

Imports here stay light (click and the standard library): every command loads this module.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import wraps
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

if TYPE_CHECKING:
    from crawlfleet.config import Settings
    from crawlfleet.frontier.ports import Frontier

T = TypeVar("T")


@dataclass(frozen=True)
class Options:
    """The group's options, for every command (``ctx.obj``)."""

    config: str | None = None
    verbose: int = 0
    quiet: int = 0

    @property
    def log_level(self) -> int:
        level = logging.WARNING + 10 * (self.quiet - self.verbose)
        return max(logging.DEBUG, min(logging.CRITICAL, level))

    def argv(self) -> list[str]:
        """These options as arguments of ``crawlfleet`` (for the worker processes)."""
        out = ["--config", self.config] if self.config else []
        return out + ["-v"] * self.verbose + ["-q"] * self.quiet


def options(ctx: click.Context) -> Options:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Options) else Options()


def verbosity(fn: Callable[..., T]) -> Callable[..., T]:
    """``-v``/``-q`` on a command as well as before it (``crawl x.py -q``): they add up."""

    @click.option("-v", "--verbose", "more", count=True, help="More log output (-vv debug).")
    @click.option("-q", "--quiet", "less", count=True, help="-q: no progress, -qq: no summary.")
    @wraps(fn)
    def wrapper(*args: Any, more: int, less: int, **kwargs: Any) -> T:
        if more or less:
            root = click.get_current_context().find_root()
            old = options(root)
            root.obj = Options(old.config, old.verbose + more, old.quiet + less)
            logging.getLogger().setLevel(root.obj.log_level)
        return fn(*args, **kwargs)

    return wrapper


def fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine (uvloop where available); a crawlfleet error becomes one line
    and its exit code (2, or 3 for a worker that stopped itself), Ctrl-C exit code 130."""
    from crawlfleet.errors import CrawlfleetError

    try:
        return run_loop(coro)
    except CrawlfleetError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


def run_loop(coro: Coroutine[Any, Any, T]) -> T:
    """``coro`` to its end on a fresh event loop (uvloop where available)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every POSIX platform
        return asyncio.run(coro)
    result: T = uvloop.run(coro)
    return result


def one_line_errors(fn: Callable[..., T]) -> Callable[..., T]:
    """A click callback whose crawlfleet errors end as one line and exit code 2."""
    from crawlfleet.errors import CrawlfleetError

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except CrawlfleetError as exc:
            fail(str(exc))

    return wrapper


def async_command(fn: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T]:
    """A click callback written as a coroutine function."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        return run(fn(*args, **kwargs))

    return wrapper


def settings(ctx: click.Context, overrides: Mapping[str, Any] | None = None) -> Settings:
    """The settings: crawlfleet.toml (or --config), the environment, then ``overrides``."""
    from crawlfleet.config import load_settings
    from crawlfleet.errors import CrawlfleetError

    try:
        return load_settings(options(ctx).config, overrides).check()
    except CrawlfleetError as exc:
        fail(str(exc))


@asynccontextmanager
async def opened(
    settings: Settings, *, create: bool = True, outage_grace: float = 0.0
) -> AsyncIterator[Frontier]:
    """The store ``settings.queue`` names, open for the ``async with``. ``create=False`` (the
    read-only commands): a store that does not exist is an error naming it, never created.
    ``outage_grace``: seconds its calls wait out a store that is away (the long-running ones)."""
    from crawlfleet.frontier import open_frontier

    store = open_frontier(
        settings.queue, pacing=settings.pacing_config(), create=create, outage_grace=outage_grace
    )
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    """``NAME=VALUE`` arguments (``-a``, ``-s``) as a dict; a malformed one is a usage error."""
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint=flag)
        out[name.strip()] = value
    return out


async def one_job(store: Frontier, job: str | None) -> str:
    """``job`` if the store has it, else the store's only job; one-line errors otherwise."""
    from crawlfleet.errors import UsageError

    if job:
        if await store.get_job(job) is None:
            raise UsageError(f"no job named {job!r}")
        return job
    jobs = await store.list_jobs()
    if not jobs:
        raise UsageError("the queue store has no jobs yet")
    if len(jobs) > 1:
        names = ", ".join(j.name for j in jobs)
        raise UsageError(f"several jobs ({names}); choose one with --job")
    return jobs[0].name


queue_option = click.option(
    "--queue",
    "queue",
    metavar="URL",
    help="Queue store: sqlite:///path.db (default ./.crawlfleet/queue.db) or postgresql://…",
)
