"""What the demo shop saw, for tests to assert on (served as JSON by ``/__admin/stats``)."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Stats"]


@dataclass
class Stats:
    """What the server saw, for tests to assert on (served as JSON by ``/__admin/stats``)."""

    paths: Counter[str] = field(default_factory=Counter)
    pages: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    clients: Counter[str] = field(default_factory=Counter)
    #: per client address, its requests per section of the shop (a path's first segment:
    #: "product", "category", "robots.txt"; "" for the home page): which route fetched what
    sections: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    per_second: defaultdict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    faults: Counter[str] = field(default_factory=Counter)
    first_at: float | None = None  # when the first and the last request came (epoch seconds)
    last_at: float | None = None
    # (arrival, status) of every request answered, arrival in seconds after first_at: the shape
    # of a crawl in time (its bulk rate, its pace after a 429)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    # with the session cookie on: (arrival, client, cookie sent, cookie given, status) each
    sessions: list[tuple[float, str, str | None, str | None, int]] = field(default_factory=list)

    def request(self, client: str, path: str, page: str, second: int) -> float:
        """Count one request; returns its arrival time (epoch seconds)."""
        now = time.time()
        self.first_at = self.first_at or now
        self.last_at = now
        self.paths[path] += 1
        self.pages[page] += 1
        self.clients[client] += 1
        self.sections[client][path.lstrip("/").split("/", 1)[0].split("?", 1)[0]] += 1
        self.per_second[client][second] += 1
        return now

    def answered(self, arrival: float, status: int) -> None:
        self.statuses[str(status)] += 1
        self.timeline.append((round(arrival - (self.first_at or arrival), 4), status))

    def session(
        self, arrival: float, client: str, sent: str | None, given: str | None, status: int
    ) -> None:
        when = round(arrival - (self.first_at or arrival), 4)
        self.sessions.append((when, client, sent, given, status))

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": sum(self.paths.values()),
            "paths": dict(self.paths),
            "pages": dict(self.pages),
            "statuses": dict(self.statuses),
            "clients": dict(self.clients),
            "sections": {client: dict(counts) for client, counts in self.sections.items()},
            "per_second": {
                client: {str(sec): n for sec, n in sorted(counts.items())}
                for client, counts in self.per_second.items()
            },
            "max_per_second": {c: max(n.values()) for c, n in self.per_second.items() if n},
            "faults": dict(self.faults),
            "first_at": self.first_at,
            "last_at": self.last_at,
            "timeline": self.timeline,
            "sessions": self.sessions,
        }
