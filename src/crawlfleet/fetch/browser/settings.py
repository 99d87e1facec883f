"""How a browser pool behaves, and the Chromium command line it launches with (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

WaitUntil = Literal["commit", "domcontentloaded", "load", "networkidle"]
MemoryMetric = Literal["anon", "rss"]
WAIT_STATES: frozenset[str] = frozenset({"commit", "domcontentloaded", "load", "networkidle"})

DEFAULT_EXECUTABLE = "/usr/bin/chromium"
"""Debian's ``chromium`` package; never a browser downloaded at run time."""

# Flags for a headless crawler on a server: no sandbox (workers may run as root, and the
# sandbox needs user namespaces a container may not have), no GPU, nothing that phones home or
# updates itself, and no QUIC (it would go around an HTTP proxy). WebRTC may not send UDP
# outside the proxy: it would reach addresses the route checks never see. Playwright adds its
# own (shared memory in /tmp, no back-forward cache, no breakpad, ...) and a --disable-features
# list: passing that flag again would replace its list, so it is not used here.
BASE_FLAGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--mute-audio",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
)

DEFAULT_BLOCKED: frozenset[str] = frozenset({"image", "font", "media"})
"""Playwright resource types that are aborted by default: a crawler reads the DOM, not pixels."""


@dataclass(frozen=True, slots=True)
class BrowserSettings:
    """One :class:`~crawlfleet.fetch.browser.BrowserPool` and its fetches. Sizes are bytes,
    times seconds."""

    executable: str = DEFAULT_EXECUTABLE
    headless: bool = True
    extra_args: tuple[str, ...] = ()
    """More Chromium flags (not ``--disable-features``: see ``BASE_FLAGS``)."""
    contexts: int = 4
    """N: browser contexts, each one session identity with one page in flight at a time."""
    pages_per_context: int = 50
    """M: a context is closed (cookies, caches and its renderer's grown heap freed) after this
    many pages."""
    pages_per_browser: int = 2000
    """K: the browser is restarted after this many pages."""
    memory_budget: int = 2 * GiB
    """Memory of the browser's processes (see ``memory_metric``) above which it is restarted
    once the pages in flight are done."""
    memory_metric: MemoryMetric = "anon"
    """What the budget is compared with, summed over the browser's processes: ``anon``
    (RssAnon + RssShmem: what they allocated, close to their PSS) or ``rss`` (VmRSS, which
    counts the browser's binary and libraries once per process: ~3x ``anon``)."""
    admit_fraction: float = 0.8
    """Above ``memory_budget * admit_fraction`` a new page waits until none is in flight."""
    memory_interval: float = 0.5
    """Least seconds between two /proc samples of the browser's memory."""
    timeout: float = 30.0
    """Total deadline of one page: navigation, waits, actions and reading the result."""
    navigation_timeout: float = 20.0
    """Deadline of the navigation alone (``page.goto`` until ``wait_until``)."""
    close_timeout: float = 5.0
    """How long closing a page or context may take before the browser is restarted."""
    launch_timeout: float = 30.0
    wait_until: WaitUntil = "load"
    """Default navigation end: ``commit``, ``domcontentloaded``, ``load`` or ``networkidle``."""
    block_resources: frozenset[str] = DEFAULT_BLOCKED
    """Playwright resource types aborted by routing (``image``, ``font``, ``media``, ...)."""
    user_agent: str | None = None
    """Default user agent of new contexts (None: Chromium's own)."""
    viewport: tuple[int, int] = (1280, 800)
    max_body: int = 16 * MiB
    """Most bytes of the document and of the rendered DOM; more raises ``BodyTooLarge``."""
    max_xhr: int = 50
    """Most XHR/fetch JSON responses kept per page."""
    max_xhr_body: int = 1 * MiB
    """Most bytes of one kept XHR body (larger ones are listed with ``body=None``)."""
    max_xhr_total: int = 8 * MiB
    """Most XHR body bytes kept per page."""
    allow_private_addresses: bool = False
    private_ok_hosts: frozenset[str] = frozenset()
    """Hosts (lower-case) that may be loopback/private: the ones named in ``start_urls``."""
    ca_file: str | None = None
    """Authorities trusted besides Chromium's own and ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``'s
    (``[fetch] ca_file``; see ``trust``)."""
    tls_verify: bool = True
    """False: certificates are not checked (a fetcher's guard may say so for its contexts)."""
    runtime_dir: str | None = None
    """Where running pools register their browsers, for the orphan sweep (None: the system
    temporary directory's ``crawlfleet-browsers``)."""

    def __post_init__(self) -> None:
        if self.contexts < 1 or self.pages_per_context < 1 or self.pages_per_browser < 1:
            raise ValueError("contexts, pages_per_context and pages_per_browser must be >= 1")
        if not 0 < self.admit_fraction <= 1:
            raise ValueError("admit_fraction must be in (0, 1]")
        if self.memory_metric not in ("anon", "rss"):
            raise ValueError("memory_metric must be 'anon' or 'rss'")
        if self.wait_until not in WAIT_STATES:
            raise ValueError(f"wait_until must be one of {sorted(WAIT_STATES)}")


def launch_args(settings: BrowserSettings) -> list[str]:
    """Chromium's command-line flags for ``settings`` (Playwright adds its own)."""
    return [*BASE_FLAGS, *settings.extra_args]
