"""Slack and mail deliveries against real servers: a Slack-style receiver gets the event as
``{"text": ...}``, an SMTP server (aiosmtpd on a loopback port) gets it as a mail; both through
the outbox, like every other delivery."""

from __future__ import annotations

import asyncio
import json
import socket
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from tests.sites.receiver import Receiver

from crawlfleet.config import Settings
from crawlfleet.frontier import open_frontier
from crawlfleet.frontier.outbox import OutboxEvent
from crawlfleet.monitor.quality import Breach
from crawlfleet.notify.deliver import Deliverer
from crawlfleet.notify.destinations import destinations
from crawlfleet.notify.payloads import alert_body, dumps

pytestmark = pytest.mark.slow


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], Message]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(
            (envelope.mail_from, list(envelope.rcpt_tos), message_from_bytes(envelope.content))
        )
        return "250 OK"


def _alert() -> OutboxEvent:
    breach = Breach(
        "field_coverage",
        0.7,
        1.0,
        0.1,
        "rating: coverage 70.0%",
        field="rating",
        examples="missing_field",
    )
    ex = [{"kind": "record", "key": "p1", "url": "http://shop.test/p/1"}]
    key = "alert:shop:2:field_coverage:rating"
    return OutboxEvent(key, "alert", dumps(alert_body(key, "shop", 2, breach, ex, 1.0)), ())


async def test_slack_and_mail_get_the_alert(tmp_path: Path) -> None:
    inbox = Inbox()
    with socket.socket() as probe:  # a free port (the controller checks it by connecting)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    smtp = Controller(inbox, hostname="127.0.0.1", port=port)
    smtp.start()
    slack = await Receiver({}).start()
    store = open_frontier(f"sqlite:///{tmp_path / 'queue.db'}")
    await store.open()
    try:
        settings = Settings.of(
            **{
                "notify.slack_webhook": f"{slack.url}/services/T0/B0/SECRET",
                "notify.smtp": f"smtp://127.0.0.1:{port}",
                "notify.email_to": "ops@example.test",
                "notify.email_from": "crawlfleet@example.test",
            }
        )
        dests = destinations(settings)
        event = _alert()
        await store.emit(
            [OutboxEvent(event.key, event.kind, event.body, tuple(d.id for d in dests))]
        )
        async with Deliverer(store, dests, settings.notify, owner="t") as deliverer:
            assert await deliverer.drain(30)
        (posted,) = slack.bodies("/services/T0/B0/SECRET")
        assert set(posted) == {"text"}
        assert "shop run 2" in posted["text"] and "`rating`" in posted["text"]
        assert slack.keys("/services/T0/B0/SECRET") == {event.key}
        await asyncio.sleep(0)
        (mail_from, to, msg) = inbox.messages[0]
        assert (mail_from, to) == ("crawlfleet@example.test", ["ops@example.test"])
        assert "field_coverage" in msg["Subject"] and "shop run 2" in msg["Subject"]
        text = msg.get_payload(decode=True).decode()  # type: ignore[union-attr]
        assert json.loads(text[text.index("{") :])["idempotency_key"] == event.key
        assert len(inbox.messages) == 1
        counts = {c.destination: c for c in await store.outbox_counts()}
        assert all(c.done == 1 and c.dead == 0 for c in counts.values())
    finally:
        await store.close()
        await slack.stop()
        smtp.stop()
