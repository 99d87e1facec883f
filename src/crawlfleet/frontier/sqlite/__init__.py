"""The embedded store: one SQLite file in WAL mode, shared by the local worker processes.

Split along the ports: ``connection.py`` (the connection, the schema and migrations, the shared
plumbing), ``queue.py`` (the Queue port's verbs), ``frontier.py`` (SQLiteFrontier: the Jobs
and Pacing verbs, and the read side written once in :mod:`crawlfleet.frontier.insights`). Only
:func:`crawlfleet.frontier.open_frontier` and the tests import a backend.
"""

from __future__ import annotations

from crawlfleet.frontier.sqlite.connection import MIGRATIONS, SCHEMA_VERSION
from crawlfleet.frontier.sqlite.frontier import SQLiteFrontier

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLiteFrontier"]
