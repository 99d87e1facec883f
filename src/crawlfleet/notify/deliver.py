"""Sending the outbox: lease deliveries due to the destinations this process knows, send them,
settle them. A delivery is done on a 2xx answer; anything else (an error status, a refused
connection, a timeout) is tried again after a capped, jittered backoff (``[notify] backoff``,
doubled per try up to ``backoff_cap``; a ``Retry-After`` is honoured up to the cap), and is
dead after ``tries`` (``crawlfleet notify replay`` queues it again). Redirects are not
followed. A receiver may be on a loopback or private address: the address guard is for crawled
links, not for the endpoints the user configured.

Each delivery is leased (``delivery_lease`` seconds): a process killed mid-delivery loses
nothing, the lease expires and another process sends it again with the same
``Idempotency-Key``. So a receiver sees every event at least once, and exactly once when it
drops the keys it has seen.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import smtplib
import ssl
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from email.message import EmailMessage
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote, urlsplit

from crawlfleet.frontier.outbox import Delivery, DeliveryResult
from crawlfleet.notify.destinations import Destination
from crawlfleet.notify.payloads import email_text, slack_body
from crawlfleet.notify.signing import SIGNATURE_HEADER, sign
from crawlfleet.policy.retry import backoff, parse_retry_after

if TYPE_CHECKING:
    import aiohttp

    from crawlfleet.config.sections import NotifySettings
    from crawlfleet.frontier.ports import Frontier

__all__ = ["Deliverer", "SendError"]

log = logging.getLogger("crawlfleet.notify")

USER_AGENT: Final = "crawlfleet-notify/0.1"
#: deliveries one process sends at once
PARALLEL: Final = 8
#: seconds an idle deliverer waits before it looks again
IDLE: Final = 1.0
#: seconds a draining deliverer waits for a retry to come due
DRAIN_POLL: Final = 0.2


class SendError(Exception):
    """A delivery that did not go through: why (no URL in it), the status, a Retry-After."""

    def __init__(self, why: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(why)
        self.status = status
        self.retry_after = retry_after


class Deliverer:
    """Delivers the outbox's rows for ``destinations`` (those this process can send to)."""

    def __init__(
        self,
        store: Frontier,
        destinations: Sequence[Destination],
        settings: NotifySettings,
        *,
        owner: str,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.store = store
        self.destinations = {d.id: d for d in destinations}
        self.settings = settings
        self.owner = owner
        self.clock = clock
        self.rand = rand
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Deliverer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            import aiohttp  # on the first webhook: a run that sends none never loads it

            timeout = aiohttp.ClientTimeout(total=self.settings.timeout)
            self._session = aiohttp.ClientSession(
                timeout=timeout, headers={"User-Agent": USER_AGENT}
            )
        return self._session

    async def deliver_once(self, limit: int = PARALLEL) -> int:
        """Lease up to ``limit`` due deliveries, send them at once, settle them; returns how
        many were leased (0: nothing is due)."""
        if not self.destinations:
            return 0
        leased = await self.store.lease_deliveries(
            self.owner, sorted(self.destinations), limit, self.settings.delivery_lease
        )
        if not leased:
            return 0
        # each settled as soon as it is sent: a process killed now repeats as few as can be
        await asyncio.gather(*(self._settle(d) for d in leased))
        return len(leased)

    async def _settle(self, d: Delivery) -> None:
        await self.store.settle_deliveries([await self._one(d)])

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Deliver until cancelled (or ``stop`` is set), resting while nothing is due."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            try:
                busy = await self.deliver_once()
            except Exception as exc:  # the store is away, or a bug: never stop the process
                log.warning("delivering notifications failed: %s", exc)
                busy = 0
            if not busy:
                with suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), IDLE)

    async def drain(self, timeout: float) -> bool:
        """Deliver until nothing waits for these destinations (retries too), for at most
        ``timeout`` seconds; returns whether nothing was left waiting."""
        deadline = time.monotonic() + timeout
        while True:
            if await self.deliver_once():
                continue
            if not await self._waiting():
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(min(DRAIN_POLL, max(0.0, deadline - time.monotonic())))

    async def _waiting(self) -> int:
        counts = await self.store.outbox_counts()
        return sum(c.pending for c in counts if c.destination in self.destinations)

    async def _one(self, d: Delivery) -> DeliveryResult:
        dest = self.destinations[d.destination]
        try:
            status = await self._send(dest, d)
        except SendError as exc:
            return self._failed(d, dest, str(exc), exc.status, exc.retry_after)
        except Exception as exc:  # a bug in a sender: the delivery is tried again
            log.exception("sending to %s failed", dest.label)
            return self._failed(d, dest, f"{type(exc).__name__}", None, None)
        return DeliveryResult(d.id, d.token, ok=True, status=status)

    def _failed(
        self,
        d: Delivery,
        dest: Destination,
        why: str,
        status: int | None,
        retry_after: float | None,
    ) -> DeliveryResult:
        s = self.settings
        if d.attempts >= d.max_attempts:
            log.warning("%s: event %s dead after %d tries: %s", dest.label, d.key, d.attempts, why)
            return DeliveryResult(d.id, d.token, ok=False, retry_at=None, status=status, error=why)
        wait = backoff(d.attempts - 1, base=s.backoff, cap=s.backoff_cap, rand=self.rand())
        if retry_after is not None:
            wait = max(wait, min(retry_after, s.backoff_cap))
        log.info("%s: event %s not delivered (%s), again in %.0fs", dest.label, d.key, why, wait)
        return DeliveryResult(
            d.id, d.token, ok=False, retry_at=self.clock() + wait, status=status, error=why
        )

    async def _send(self, dest: Destination, d: Delivery) -> int | None:
        if dest.kind == "email":
            await asyncio.to_thread(_mail, dest, d, self.settings.timeout)
            return None
        body = d.body.encode("utf-8")
        if dest.kind == "slack":
            body = json.dumps(slack_body(json.loads(d.body)), ensure_ascii=False).encode()
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": d.key,
            "X-Crawlfleet-Event": d.kind,
        }
        if dest.secret:
            headers[SIGNATURE_HEADER] = sign(dest.secret, body)
        import aiohttp

        try:
            async with self._http().post(
                dest.url, data=body, headers=headers, allow_redirects=False
            ) as resp:
                await resp.read()
                if 200 <= resp.status < 300:
                    return resp.status
                retry_after = parse_retry_after(resp.headers.get("Retry-After"), time.time())
                raise SendError(f"HTTP {resp.status}", resp.status, retry_after)
        except SendError:
            raise
        except TimeoutError:
            raise SendError(f"no answer within {self.settings.timeout:g}s") from None
        except aiohttp.ClientConnectorError as exc:
            raise SendError(f"cannot connect to {exc.host}:{exc.port}") from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise SendError(type(exc).__name__ + _hidden(str(exc), dest.url)) from None


def _hidden(text: str, url: str) -> str:
    """``text`` without ``url`` (an endpoint's path and query may be its secret)."""
    text = text.replace(url, "[endpoint]").strip()
    return f": {text.splitlines()[0]}" if text else ""


def _mail(dest: Destination, d: Delivery, timeout: float) -> None:
    """Send one event as a mail (in a thread: smtplib blocks). ``smtps://`` is TLS from the
    start; ``smtp://`` upgrades with STARTTLS when the server offers it."""
    parts = urlsplit(dest.url)
    subject, text = email_text(json.loads(d.body))
    msg = EmailMessage()
    msg["Subject"] = subject
    msg["From"] = dest.sender
    msg["To"] = ", ".join(dest.to)
    msg["Message-ID"] = f"<{d.key.replace(':', '.')}@crawlfleet>"
    msg.set_content(text)
    host, context = parts.hostname or "localhost", ssl.create_default_context()
    try:
        if parts.scheme == "smtps":
            client: smtplib.SMTP = smtplib.SMTP_SSL(
                host, parts.port or 465, timeout=timeout, context=context
            )
        else:
            client = smtplib.SMTP(host, parts.port or 25, timeout=timeout)
        with client:
            client.ehlo()
            if parts.scheme == "smtp" and client.has_extn("starttls"):
                client.starttls(context=context)
                client.ehlo()
            if parts.username:
                client.login(unquote(parts.username), unquote(parts.password or ""))
            client.send_message(msg)
    except smtplib.SMTPResponseException as exc:
        raise SendError(f"SMTP {exc.smtp_code}", exc.smtp_code) from None
    except (smtplib.SMTPException, OSError) as exc:
        raise SendError(f"SMTP: {type(exc).__name__}") from None
