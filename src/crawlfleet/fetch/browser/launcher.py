"""Launching Chromium through Playwright, opening its contexts, and closing it for good."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from playwright.async_api import Error as PlaywrightError

from crawlfleet.errors import BrowserError, ConfigError
from crawlfleet.fetch.browser import procs
from crawlfleet.fetch.browser.request import ContextSeed
from crawlfleet.fetch.browser.routing import ContextRouter, GuardPolicy, RouteGuard
from crawlfleet.fetch.browser.settings import BrowserSettings, launch_args
from crawlfleet.urls import mask_credentials

if TYPE_CHECKING:
    from pathlib import Path

    from playwright.async_api import Browser, BrowserContext, Playwright

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ContextKey:
    """A session identity: pages with equal keys share a context (and so its cookies)."""

    session: str | None = None
    proxy: str | None = None
    """Proxy URL (``http://user:pass@host:port``, ``socks5://...``) for this identity."""
    user_agent: str | None = None
    guard: GuardPolicy | None = None
    """The address guard of the fetcher asking (None: the pool's settings'). Contexts are not
    shared between guards, so two jobs on one pool never share one."""

    def __repr__(self) -> str:
        proxy = mask_credentials(self.proxy) if self.proxy else None
        return f"ContextKey(session={self.session!r}, proxy={proxy!r}, ua={self.user_agent!r})"


class LaunchedBrowser:
    """One running Chromium: Playwright's handle, its process (if found), its registration."""

    def __init__(
        self, browser: Browser, proc: procs.Proc | None, registration: procs.Registration | None
    ) -> None:
        self.browser = browser
        self.proc = proc
        self.registration = registration

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def memory(self) -> procs.Memory | None:
        """Summed memory of the browser's process group now (a blocking /proc read)."""
        if self.proc is None:
            return None
        return procs.group_memory(self.proc.pid, self.proc.start)

    def pss(self) -> int:
        """Summed proportional set size of the group (shared pages divided among users; slow:
        ~70 ms for twenty processes)."""
        if self.proc is None:
            return 0
        return sum(procs.pss(p.pid) for p in procs.browser_group(self.proc.pid, self.proc.start))

    async def new_context(
        self,
        key: ContextKey,
        guard: RouteGuard,
        settings: BrowserSettings,
        seed: ContextSeed | None = None,
    ) -> tuple[BrowserContext, ContextRouter]:
        """A context for session identity ``key`` (starting with ``seed``'s headers and
        cookies), every request routed (see routing.py)."""
        options: dict[str, Any] = {
            "viewport": {"width": settings.viewport[0], "height": settings.viewport[1]},
            # A service worker's requests would not go through the context's routing.
            "service_workers": "block",
        }
        user_agent = key.user_agent or settings.user_agent
        if user_agent:
            options["user_agent"] = user_agent
        if key.proxy:
            options["proxy"] = proxy_settings(key.proxy)
        policy = key.guard or GuardPolicy.of(settings)
        if not policy.tls_verify:  # the fetcher warns once per host
            options["ignore_https_errors"] = True
        if seed is not None and seed.headers:
            options["extra_http_headers"] = dict(seed.headers)
        context = await self.browser.new_context(**options)
        if seed is not None and seed.cookies:
            await context.add_cookies(list(seed.cookies))  # type: ignore[arg-type]
        router = ContextRouter(guard, settings.block_resources, proxied=key.proxy is not None)
        await context.route("**/*", router.handle)
        return context, router

    async def close(self, timeout: float) -> None:
        """Close the browser; whatever is left of its process group after ``timeout`` (or a
        crash: renderers of a dead browser) is killed."""
        try:
            async with asyncio.timeout(timeout):
                await self.browser.close()
        except (TimeoutError, PlaywrightError):
            log.warning("the browser did not close in time: killing its processes")
        if self.proc is not None:
            await asyncio.to_thread(procs.kill_browser, self.proc.pid, self.proc.start)
        if self.registration is not None:
            self.registration.remove()


async def launch(
    pw: Playwright,
    settings: BrowserSettings,
    runtime: Path,
    on_disconnected: Callable[[Browser], None],
    *,
    home: Path | None = None,
) -> LaunchedBrowser:
    """Launch Chromium marked as this process's, find its process and register it; ``home``
    is its ``HOME`` (whose NSS store trusts more authorities: see ``trust``)."""
    marker = procs.owner_marker(secrets.token_hex(6))
    env: dict[str, str | float | bool] = {**os.environ, procs.OWNER_ENV: marker}
    if home is not None:
        env["HOME"] = str(home)
    try:
        browser = await pw.chromium.launch(
            executable_path=settings.executable,
            headless=settings.headless,
            args=launch_args(settings),
            env=env,
            timeout=settings.launch_timeout * 1000,
            chromium_sandbox=False,
        )
    except PlaywrightError as exc:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        raise BrowserError(f"cannot launch Chromium at {settings.executable}: {first}") from exc
    browser.on("disconnected", on_disconnected)
    proc = await asyncio.to_thread(procs.find_browser, marker)
    registration = None
    if proc is not None:
        profile = procs.profile_dir(proc.pid)
        registration = procs.Registration.write(runtime, marker, proc, profile)
    else:
        log.warning("cannot find the Chromium process just launched: memory is not measured")
    return LaunchedBrowser(browser, proc, registration)


def check_executable(exe: str) -> None:
    """Refuse to start without a browser: never download one at run time."""
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        raise ConfigError(
            f"no Chromium at {exe}: install Debian's chromium package "
            "(apt-get install chromium) or set the browser executable"
        )


def proxy_settings(proxy: str) -> dict[str, str]:
    """Playwright's proxy settings for a proxy URL (credentials passed separately)."""
    parts = urlsplit(proxy)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    settings = {
        "server": urlunsplit((parts.scheme or "http", netloc, "", "", "")),
        # Chromium never proxies loopback targets unless told to; the HTTP fetcher sends
        # everything through the proxy, and so does this.
        "bypass": "<-loopback>",
    }
    if parts.username:
        settings["username"] = parts.username
        settings["password"] = parts.password or ""
    return settings
