"""What a stop signal means when one came before: the same stop, or "exit now".

A graceful stop must stay graceful when the signal comes twice at once. A supervisor that
signals a process *and its group* (systemd's default ``KillMode=control-group``, GNU
``timeout``) makes each worker see ``crawl``'s forwarded SIGTERM and its own within
milliseconds; read as "exit now", it would drop the leases in flight. So a repeated SIGTERM (or
SIGHUP) within :data:`STOP_GRACE` seconds of the first is the same stop; later, it means exit
now. A second Ctrl-C (SIGINT: a person at a terminal) means exit now at once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

__all__ = ["STOP_GRACE", "Stop", "StopSignals"]

#: seconds after the first stop signal in which a repeated SIGTERM is the same stop
STOP_GRACE: Final = 2.0


class Stop(enum.Enum):
    DRAIN = "drain"  # the first: no new work, finish what is in flight, give the rest back
    SAME = "same"  # a repeat of the first (a supervisor's signal and its forwarded copy)
    NOW = "now"  # exit at once


@dataclass
class StopSignals:
    """The stop signals one process got; :meth:`read` says what the next one means."""

    grace: float = STOP_GRACE
    first_at: float | None = None

    def read(self, now: float, *, terminal: bool = False) -> Stop:
        """What a stop signal at ``now`` (monotonic seconds) means; ``terminal``: it is SIGINT
        (Ctrl-C). A clock that stepped back counts as within the grace."""
        if self.first_at is None:
            self.first_at = now
            return Stop.DRAIN
        if terminal or not now - self.first_at < self.grace:
            return Stop.NOW
        return Stop.SAME
