"""The frontier: the store's ports (:mod:`.ports`) and their backends, chosen by the queue URL."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from crawlfleet.errors import ConfigError
from crawlfleet.frontier.ports import Frontier
from crawlfleet.urls import mask_credentials

if TYPE_CHECKING:
    from crawlfleet.policy.pacing import PacingConfig

__all__ = ["open_frontier"]

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def open_frontier(
    url: str,
    *,
    clock: Callable[[], float] = time.time,
    pacing: PacingConfig | None = None,
    create: bool = True,
    outage_grace: float = 0.0,
) -> Frontier:
    """The frontier a queue URL names (not opened yet: ``await frontier.open()``).

    ``pacing`` is how the store adapts each domain's pace to the outcomes it is told about
    (``[pacing]`` in crawlfleet.toml; the defaults suit most sites). With ``create=False`` the
    store must exist already: ``open()`` raises a one-line :class:`UsageError` naming the store
    it looked for instead of creating one (what the read-only commands use). ``outage_grace``
    is how many seconds a call of a PostgreSQL store waits for a server that is away (refused,
    cut, restarting, out of connections), reconnecting with backoff, before it fails (the
    worker's ``[worker] store_outage_grace``; 0, the default, fails at once).

    * ``sqlite:///relative/queue.db``, ``sqlite:////abs/queue.db`` or a bare path ending in
      ``.db`` → the embedded SQLite store;
    * ``postgresql://user:pass@host:5432/db`` (or ``postgres://``) → the fleet store; a
      ``schema=NAME`` query parameter puts its tables in that schema.
    """
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        if not path.startswith("/") or path == "/":
            raise ConfigError(f"queue URL {url!r} names no file: use sqlite:///path/queue.db")
        from crawlfleet.frontier.sqlite import SQLiteFrontier

        return SQLiteFrontier(path[1:], clock=clock, pacing=pacing, create=create)
    if url.startswith(("postgresql://", "postgres://")):
        from crawlfleet.frontier.postgres import PostgresFrontier

        dsn, schema = _split_schema(url)
        return PostgresFrontier(
            dsn,
            clock=clock,
            schema=schema,
            pacing=pacing,
            create=create,
            outage_grace=outage_grace,
        )
    if "://" not in url and url.endswith(_SQLITE_SUFFIXES):
        from crawlfleet.frontier.sqlite import SQLiteFrontier

        return SQLiteFrontier(url, clock=clock, pacing=pacing, create=create)
    raise ConfigError(
        f"unsupported queue URL {mask_credentials(url)!r}: use sqlite:///path/queue.db, "
        "a path ending in .db, or postgresql://user@host:5432/database"
    )


def _split_schema(url: str) -> tuple[str, str | None]:
    """Take the ``schema=`` query parameter out of a PostgreSQL URL (the driver would reject it)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    if schema is None:
        return url, None
    if not schema:
        raise ConfigError(f"queue URL {mask_credentials(url)!r} has an empty schema=")
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema
