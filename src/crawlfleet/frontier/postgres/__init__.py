"""The fleet's store on PostgreSQL: a pool of asyncpg connections, LISTEN/NOTIFY, leases taken
with SKIP LOCKED.

Split along the ports: ``connection.py`` (the connection, the schema and migrations, the shared
plumbing), ``queue.py`` (the Queue port's verbs), ``frontier.py`` (PostgresFrontier: the Jobs
and Pacing verbs, and the read side written once in :mod:`crawlfleet.frontier.insights`). Only
:func:`crawlfleet.frontier.open_frontier` and the tests import a backend.
"""

from __future__ import annotations

from crawlfleet.frontier.postgres.connection import MIGRATIONS, SCHEMA_VERSION
from crawlfleet.frontier.postgres.frontier import PostgresFrontier

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresFrontier"]
