"""What a browser fetch is asked to do beyond a plain request, and a session as a context seed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crawlfleet.fetch.base import FetchRequest
from crawlfleet.fetch.browser.settings import WaitUntil

if TYPE_CHECKING:
    from playwright.async_api import Page

    from crawlfleet.routes.sessions import Session

PageAction = Callable[["Page"], Awaitable[None]]
"""A spider's page actions (scroll, click, read): awaited with the page once it is ready."""


@dataclass(frozen=True, slots=True)
class BrowserRequest(FetchRequest):
    """A :class:`~crawlfleet.fetch.base.FetchRequest` with what only a browser does; any
    ``FetchRequest`` works too (the settings' defaults apply)."""

    wait_until: WaitUntil | None = None
    """How the navigation ends (None: the settings' ``wait_until``)."""
    wait_for: str | None = None
    """A CSS selector to wait for after the navigation."""
    actions: PageAction | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True, repr=False)
class ContextSeed:
    """What a new context starts with: a session's headers and cookies (Playwright's form)."""

    headers: tuple[tuple[str, str], ...] = ()
    cookies: tuple[dict[str, Any], ...] = ()

    def __repr__(self) -> str:
        names = sorted({c["name"] for c in self.cookies})
        return f"ContextSeed(headers={[k for k, _ in self.headers]}, cookies={names})"


def seed_of(session: Session) -> ContextSeed:
    """The headers and cookies of ``session`` for the context that will carry it."""
    cookies = []
    for c in session.cookies:
        cookie: dict[str, Any] = {"name": c.name, "value": c.value, "secure": c.secure}
        if c.host_only:
            # A URL, not a domain: a cookie set by domain would also go to subdomains.
            scheme = "https" if c.secure else "http"
            cookie["url"] = f"{scheme}://{c.domain}{c.path}"
        else:
            cookie.update(domain="." + c.domain, path=c.path)
        if c.expires is not None:
            cookie["expires"] = c.expires
        cookies.append(cookie)
    return ContextSeed(headers=session.headers, cookies=tuple(cookies))
