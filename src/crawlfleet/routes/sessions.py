"""Sessions: the identity a site sees, kept together so it stays consistent.

A session is a cookie jar, a user agent and headers, and the route it goes out by (a browser
context joins them later). Sessions are created on demand, reused while healthy, and retired on
a block, after ``max_uses`` requests or ``max_age`` seconds, or once their error score reaches
``max_error_score`` (Crawlee's defaults: +1 per bad attempt, -0.5 per good one, retired at 3,
50 uses, 50 minutes). In a sticky pool a session keeps its route for its whole life; a rotating
pool's session may go out by any route of the pool.

Everything here is pure (time passed in) and a :class:`Session` round-trips through JSON
(:meth:`Session.to_json` / :meth:`Session.from_json`), so the store can hold sessions
fleet-wide: a sticky session survives a worker restart and continues on another worker.
Cookie values are secrets: ``repr`` shows cookie names only.
"""

from __future__ import annotations

import email.utils
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC
from http.cookies import CookieError, SimpleCookie
from typing import Any, Final, Self
from urllib.parse import urlsplit

from crawlfleet.routes.pools import Pool, PoolMode, Route

__all__ = ["Cookie", "Session", "SessionConfig", "pick_session", "session_route"]


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """When a session is retired (Crawlee's defaults)."""

    max_error_score: float = 3.0
    bad_penalty: float = 1.0
    good_reward: float = 0.5
    max_uses: int = 50
    max_age: float = 3000.0
    rotate_followed: bool = False
    """The pool set ``session_uses`` or ``session_age`` itself: a session whose cookies the
    crawl follows still retires at those limits (its pages' requests go on with another).
    By default such a session is kept, as a named one, until a block or errors retire it."""

    @classmethod
    def for_pool(cls, pool: Pool) -> SessionConfig:
        """These defaults with the pool's ``session_uses`` / ``session_age``."""
        config = cls()
        if pool.session_uses is not None:
            config = replace(config, max_uses=pool.session_uses, rotate_followed=True)
        if pool.session_age is not None:
            config = replace(config, max_age=pool.session_age, rotate_followed=True)
        return config


DEFAULT_SESSION: Final = SessionConfig()


@dataclass(frozen=True, slots=True, repr=False)
class Cookie:
    """One stored cookie (RFC 6265, simplified: no public-suffix list)."""

    name: str
    value: str
    domain: str
    """Lower-case host (``host_only``) or the Domain attribute without its leading dot."""
    path: str = "/"
    host_only: bool = True
    secure: bool = False
    expires: float | None = None
    """Epoch seconds; None for a session cookie."""

    def matches(self, host: str, path: str, https: bool, now: float) -> bool:
        if self.expires is not None and self.expires <= now:
            return False
        if self.secure and not https:
            return False
        if self.host_only and host != self.domain:
            return False
        if not self.host_only and not _domain_match(host, self.domain):
            return False
        return path == self.path or path.startswith(self.path.rstrip("/") + "/")

    def __repr__(self) -> str:
        return f"Cookie({self.name!r}=[secure], domain={self.domain!r}, path={self.path!r})"


@dataclass(frozen=True, slots=True, repr=False)
class Session:
    """One identity. Create with :meth:`new`; every change returns a new value."""

    id: str
    route_id: str
    created_at: float
    user_agent: str
    headers: tuple[tuple[str, str], ...] = ()
    cookies: tuple[Cookie, ...] = ()
    uses: int = 0
    error_score: float = 0.0
    last_used_at: float = 0.0
    retired: str | None = None
    """Why the session was retired (``block``, or a caller's reason); None while in use."""
    named: bool = False
    """Requests name it (``meta["cookiejar"]``): it holds a login, say. A named session is not
    retired for its uses or age (see :meth:`retire_reason`), only for a block or errors."""

    @classmethod
    def new(
        cls,
        session_id: str,
        route: Route,
        now: float,
        *,
        user_agent: str,
        headers: Mapping[str, str] | None = None,
    ) -> Session:
        """A fresh session on ``route`` (``session_id``: a random token from the caller)."""
        pairs = tuple((headers or {}).items())
        return cls(session_id, route.id, now, user_agent, pairs, last_used_at=now)

    # --- lifecycle ------------------------------------------------------------------------------

    def retire_reason(self, now: float, config: SessionConfig = DEFAULT_SESSION) -> str | None:
        """Why this session may not be used any more at ``now``, or None if it may."""
        if self.retired is not None:
            return self.retired
        if self.error_score >= config.max_error_score:
            return "errors"
        if self.named:
            return None
        if self.uses >= config.max_uses:
            return "uses"
        if now - self.created_at >= config.max_age:
            return "age"
        return None

    def usable(self, now: float, config: SessionConfig = DEFAULT_SESSION) -> bool:
        return self.retire_reason(now, config) is None

    def mark_good(self, now: float, config: SessionConfig = DEFAULT_SESSION) -> Session:
        """After a request that went well: one more use, a lower error score."""
        score = max(0.0, self.error_score - config.good_reward)
        return replace(self, uses=self.uses + 1, error_score=score, last_used_at=now)

    def mark_bad(self, now: float, config: SessionConfig = DEFAULT_SESSION) -> Session:
        """After an error that may be the session's fault (not a block: see :meth:`retire`)."""
        score = self.error_score + config.bad_penalty
        return replace(self, uses=self.uses + 1, error_score=score, last_used_at=now)

    def retire(self, now: float, reason: str = "block") -> Session:
        """Retired for good (on a block: the site knows this identity)."""
        return replace(self, uses=self.uses + 1, retired=reason, last_used_at=now)

    # --- cookies and headers --------------------------------------------------------------------

    def with_cookies(self, set_cookie: Iterable[str], url: str, now: float) -> Session:
        """The session after a response from ``url`` sent these ``Set-Cookie`` header values.

        A cookie replaces the one with the same name, domain and path; one that is expired (or
        has ``Max-Age=0``) deletes it; one whose Domain does not cover the host is ignored.
        """
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        jar = {(c.name, c.domain, c.path): c for c in self.cookies}
        for header in set_cookie:
            for cookie in _parse_set_cookie(header, host, parts.path or "/", now):
                key = (cookie.name, cookie.domain, cookie.path)
                if cookie.expires is None or cookie.expires > now:
                    jar[key] = cookie  # a replacement keeps the old one's place (RFC 6265 5.3)
                else:
                    jar.pop(key, None)
        return replace(self, cookies=tuple(jar.values()))

    def cookie_header(self, url: str, now: float) -> str | None:
        """The ``Cookie`` header for a request to ``url``, or None when no cookie applies."""
        parts = urlsplit(url)
        host, path = (parts.hostname or "").lower(), parts.path or "/"
        https = parts.scheme == "https"
        chosen = [c for c in self.cookies if c.matches(host, path, https, now)]
        chosen.sort(key=lambda c: -len(c.path))  # longer paths first (RFC 6265 5.4)
        return "; ".join(f"{c.name}={c.value}" for c in chosen) or None

    def request_headers(self, url: str, now: float) -> dict[str, str]:
        """Headers to send with a request to ``url``: user agent, the session's headers, cookies."""
        headers = {"User-Agent": self.user_agent, **dict(self.headers)}
        cookie = self.cookie_header(url, now)
        if cookie is not None:
            headers["Cookie"] = cookie
        return headers

    # --- storage --------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (cookies as a list of dicts, headers as pairs)."""
        return {
            "id": self.id,
            "route_id": self.route_id,
            "created_at": self.created_at,
            "user_agent": self.user_agent,
            "headers": [list(pair) for pair in self.headers],
            "cookies": [_cookie_json(c) for c in self.cookies],
            "uses": self.uses,
            "error_score": self.error_score,
            "last_used_at": self.last_used_at,
            "retired": self.retired,
            "named": self.named,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """The session :meth:`to_json` wrote; ``ValueError`` for anything else."""
        try:
            return cls(
                id=str(data["id"]),
                route_id=str(data["route_id"]),
                created_at=float(data["created_at"]),
                user_agent=str(data["user_agent"]),
                headers=tuple((str(k), str(v)) for k, v in data["headers"]),
                cookies=tuple(Cookie(**c) for c in data["cookies"]),
                uses=int(data["uses"]),
                error_score=float(data["error_score"]),
                last_used_at=float(data["last_used_at"]),
                retired=None if data["retired"] is None else str(data["retired"]),
                named=bool(data.get("named", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a stored session: {exc}") from None

    def __repr__(self) -> str:
        names = ",".join(sorted({c.name for c in self.cookies}))
        state = f"retired={self.retired}" if self.retired else f"uses={self.uses}"
        return (
            f"Session({self.id!r}, route={self.route_id!r}, {state}, "
            f"score={self.error_score:g}, cookies=[{names}])"
        )


def session_route(session: Session, pool: Pool) -> Route | None:
    """The route ``session`` must go out by in ``pool``: its own in a sticky pool (None if the
    pool no longer has it: retire the session), any (None) in a rotating pool."""
    if pool.mode is not PoolMode.STICKY:
        return None
    return next((r for r in pool.routes if r.id == session.route_id), None)


def pick_session(
    sessions: Iterable[Session],
    now: float,
    *,
    route_ids: Collection[str] | None = None,
    config: SessionConfig = DEFAULT_SESSION,
) -> Session | None:
    """The usable session to reuse (on one of ``route_ids`` if given): the least used, so load
    spreads over identities; None means: create one."""
    usable = [
        s
        for s in sessions
        if s.usable(now, config) and (route_ids is None or s.route_id in route_ids)
    ]
    return min(usable, key=lambda s: (s.uses, s.id), default=None)


def _domain_match(host: str, domain: str) -> bool:
    return host == domain or host.endswith("." + domain)


def _parse_set_cookie(header: str, host: str, request_path: str, now: float) -> list[Cookie]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return []  # a malformed cookie is the server's problem; the page still counts
    cookies = []
    for name, morsel in jar.items():
        domain_attr = morsel["domain"].lower().lstrip(".")
        if domain_attr and not _domain_match(host, domain_attr):
            continue
        path = morsel["path"] if morsel["path"].startswith("/") else _default_path(request_path)
        cookies.append(
            Cookie(
                name=name,
                value=morsel.value,
                domain=domain_attr or host,
                path=path,
                host_only=not domain_attr,
                secure=bool(morsel["secure"]),
                expires=_expiry(morsel["max-age"], morsel["expires"], now),
            )
        )
    return cookies


def _default_path(request_path: str) -> str:
    if not request_path.startswith("/") or request_path.count("/") == 1:
        return "/"
    return request_path[: request_path.rfind("/")]


def _expiry(max_age: str, expires: str, now: float) -> float | None:
    if max_age:
        try:
            return now + int(max_age)
        except ValueError:
            pass
    if expires:
        try:
            when = email.utils.parsedate_to_datetime(expires)
        except (TypeError, ValueError, IndexError):
            return None
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    return None


def _cookie_json(cookie: Cookie) -> dict[str, Any]:
    return {
        "name": cookie.name,
        "value": cookie.value,
        "domain": cookie.domain,
        "path": cookie.path,
        "host_only": cookie.host_only,
        "secure": cookie.secure,
        "expires": cookie.expires,
    }
