"""The destinations of ``[notify]`` and ``[[sink]]``, as the outbox names them.

Each has a stable id made from what it is (its kind and endpoint), never its URL: the outbox
rows name it, every process of a fleet configured alike computes the same id, and a process
that does not know a destination leaves its deliveries to one that does. Labels (what
``status`` shows) hide everything of an endpoint but its scheme, host and port: a webhook's
path is often its secret.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from crawlfleet.config.sections import masked_endpoint

if TYPE_CHECKING:
    from crawlfleet.config import Settings

__all__ = ["Destination", "destinations"]


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class Destination:
    """Where deliveries go: ``kind`` webhook (JSON POST, signed with ``secret``), slack,
    email (through ``url``, an smtp:// URL, to ``to``) or sink (batches of changed records)."""

    id: str
    kind: str
    label: str
    events: tuple[str, ...]
    url: str = field(repr=False)
    secret: str = field(default="", repr=False)
    to: tuple[str, ...] = ()
    sender: str = ""
    batch: int = 500
    name: str = ""

    def wants(self, kind: str) -> bool:
        return kind in self.events


def destinations(settings: Settings) -> list[Destination]:
    """Every destination the settings name, in a fixed order."""
    n = settings.notify
    out = [
        Destination(
            f"webhook:{_digest('webhook', url)}",
            "webhook",
            f"webhook {masked_endpoint(url)}",
            n.events,
            url,
            n.secret,
        )
        for url in n.webhook
    ]
    out += [
        Destination(
            f"slack:{_digest('slack', url)}",
            "slack",
            f"slack {masked_endpoint(url)}",
            n.events,
            url,
        )
        for url in n.slack_webhook
    ]
    if n.smtp and n.email_to:
        to = tuple(sorted(n.email_to))
        out.append(
            Destination(
                f"email:{_digest('email', n.smtp, *to)}",
                "email",
                f"email to {', '.join(to)} via {masked_endpoint(n.smtp)}",
                n.events,
                n.smtp,
                to=to,
                sender=n.email_from,
            )
        )
    for s in settings.sinks:
        ident = s.name or _digest("sink", s.url)
        out.append(
            Destination(
                f"sink:{ident}",
                "sink",
                f"sink {s.name or masked_endpoint(s.url)}",
                ("changes",),
                s.url,
                s.secret,
                batch=s.batch,
                name=s.name or ident,
            )
        )
    return out
