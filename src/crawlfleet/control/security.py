"""Who may talk to ``serve``: the rules, pure, and the aiohttp middleware that applies them.

* **Bind**: loopback by default; any other address needs a token (:func:`check_bind`), or
  anyone who reaches the port could pause, cancel and replay jobs.
* **Host header** (DNS rebinding: a page of ``evil.example`` whose name is made to resolve to
  127.0.0.1 reaches a loopback server, but its requests say ``Host: evil.example``): only
  loopback names, the bound address, this machine's names when bound to every address, and
  ``[control] allowed_hosts``, each on our port, are answered; anything else is 400.
* **Token**: with a token configured every request needs it, checked in constant time
  (:func:`secrets.compare_digest`): ``Authorization: Bearer TOKEN`` (the API, Prometheus'
  ``bearer_token``), or HTTP Basic with the token as password (a browser asks for it) for
  reading. Missing or wrong: 401.
* **Changes** (POST: pause, resume, cancel, replay) need ``Authorization: Bearer`` with the token
  (the configured one, or one made at start and written into the pages: a header a page of
  another origin cannot set without a preflight we never grant), a JSON body, and an ``Origin``
  (or ``Sec-Fetch-Site``) of this very server: a cross-origin POST is refused with 403. Basic
  credentials, which a browser sends by itself, never authorise a change.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import secrets
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Final

from aiohttp import web

from crawlfleet.errors import UsageError

__all__ = ["Guard", "allowed_names", "check_bind", "guard_middleware", "host_allowed"]

LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS: Final = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 - names, not a bind
#: headers every answer carries: no framing (clickjacking of the buttons), no sniffing, no
#: referrer, and scripts and styles from this server only
SECURITY_HEADERS: Final = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str) -> None:
    """Refuse to bind beyond loopback without a token (a one-line :class:`UsageError`)."""
    if not is_loopback(host) and not token:
        raise UsageError(
            f"serve --host {host or '*'} needs a token ([control] token or --token): anyone "
            "who reaches the port could pause, cancel and replay jobs"
        )


def allowed_names(bind: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The Host names answered: loopback's, the bound address (this machine's names when bound
    to every address) and ``extra`` (``[control] allowed_hosts``), lowercased."""
    names = set(LOOPBACK_NAMES)
    if bind in WILDCARDS:
        names |= {socket.gethostname(), socket.getfqdn()}
    else:
        names.add(bind.strip("[]"))
    names |= {n.strip() for n in extra if n.strip()}
    return frozenset(n.lower() for n in names)


def host_allowed(header: str | None, names: frozenset[str], port: int) -> bool:
    """Whether a ``Host`` header names this server: an allowed name, on ``port`` (or none)."""
    if not header:
        return False
    value = header.strip().lower()
    if value.startswith("["):  # [::1]:8686
        name, _, rest = value[1:].partition("]")
        given = rest.removeprefix(":") if rest.startswith(":") else None
        if rest and given is None:
            return False
    else:
        name, sep, given_port = value.rpartition(":")
        if not sep:
            name, given = value, None
        else:
            given = given_port
    if given is not None and given != str(port):
        return False
    return name in names


def token_matches(given: str | None, token: str) -> bool:
    """Constant-time comparison; no token configured matches nothing."""
    if not token or given is None:
        return False
    return secrets.compare_digest(given.encode(), token.encode())


def bearer(header: str | None) -> str | None:
    if header and header[:7].lower() == "bearer ":
        return header[7:].strip()
    return None


def basic_password(header: str | None) -> str | None:
    if not header or header[:6].lower() != "basic ":
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return decoded.partition(":")[2]


def same_origin(origin: str | None, fetch_site: str | None, host: str) -> bool:
    """Whether a change comes from this server's own pages (or from a client that is no
    browser: no ``Origin``, no ``Sec-Fetch-Site``)."""
    if origin is not None:
        return origin.lower() in (f"http://{host}".lower(), f"https://{host}".lower())
    if fetch_site is not None:
        return fetch_site in ("same-origin", "none")
    return True


@dataclass
class Guard:
    """The rules of one ``serve``: the names and port it answers (the port is set once bound:
    ``--port 0`` picks one), the configured token (empty: none, on loopback) and the token its
    pages send with changes."""

    names: frozenset[str]
    port: int
    token: str
    action_token: str

    @classmethod
    def make(cls, bind: str, port: int, token: str, extra: Iterable[str] = ()) -> Guard:
        check_bind(bind, token)
        action = token or secrets.token_urlsafe(24)
        return cls(allowed_names(bind, extra), port, token, action)


GUARD: Final = web.AppKey("guard", Guard)


def _refuse(status: int, text: str, **headers: str) -> web.Response:
    return web.Response(status=status, text=text + "\n", headers={**SECURITY_HEADERS, **headers})


@web.middleware
async def guard_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Apply the :class:`Guard` of the app to every request (see the module docstring)."""
    g = request.app[GUARD]
    host = request.headers.get("Host")
    if not host_allowed(host, g.names, g.port):
        return _refuse(
            400,
            f"unknown Host header {host!r}: to open the dashboard by this name, add it to "
            "[control] allowed_hosts in crawlfleet.toml",
        )
    auth = request.headers.get("Authorization")
    if request.method in ("GET", "HEAD"):
        if g.token and not (
            token_matches(bearer(auth), g.token) or token_matches(basic_password(auth), g.token)
        ):
            return _refuse(
                401, "token required", **{"WWW-Authenticate": 'Basic realm="crawlfleet"'}
            )
    else:
        origin, site = request.headers.get("Origin"), request.headers.get("Sec-Fetch-Site")
        if not same_origin(origin, site, host or ""):
            return _refuse(403, "cross-origin request refused")
        if not token_matches(bearer(auth), g.action_token):
            return _refuse(401, "token required (Authorization: Bearer)")
        if request.content_type != "application/json":
            return _refuse(415, "send JSON (Content-Type: application/json)")
    response = await handler(request)
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)  # a stricter policy of the handler's stays
    return response
