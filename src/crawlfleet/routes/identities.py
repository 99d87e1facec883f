"""The sessions one worker uses: picked per attempt, updated by its outcome, shared by the store.

A session (:class:`~crawlfleet.routes.sessions.Session`) is an identity: cookies, user agent and
headers, and the route it was made on. Sessions are kept per job and *key*: the route id for a
sticky pool (a session keeps its proxy), the pool's name for a rotating one (any of its proxies),
``direct`` for the machine's own address. :meth:`Identities.pick` gives an attempt the least used
usable session of its key (a new one when none is), :meth:`Identities.after` folds the attempt
into it (``Set-Cookie``, good or bad, retired on a block), and :meth:`Identities.flush` saves the
changed ones to the store, from where every other worker loads them: a session survives a worker
restart and continues on another worker, and a login done once serves the whole fleet.

A request may name its session (``meta["cookiejar"]``, as in Scrapy), and the requests of a
page fetched with a named session name it too. A named session is read from the store again
when this worker's copy is older than the lease (the session's change was saved before the
request was queued, so a copy read after the lease has it), is kept past its use and age limits
(a login must not expire under the crawl), and is made anew, empty, under the same name once a
block or errors retired it.

Cookies follow the crawl: every request a page yields *follows* the session that fetched the
page once that session holds cookies (those it came with, or those the page's answer set): an
age gate's or a currency link's cookie reaches every page it links, a login form's CSRF cookie
goes with its submission and the login's cookie with every request after it, on whichever
worker leases them (read from the store as a named one is). A followed session is kept past
its use and age limits like a named one, unless its pool sets ``session_uses`` or
``session_age`` (rotation asked for: at the limit the requests go on with another session). A
followed session this key does not have (it belongs to another route of a sticky pool, say) or
that a block retired is not made anew: the request picks a session as any other does.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from crawlfleet.routes.pools import DIRECT, PoolMode, Route, RoutesConfig
from crawlfleet.routes.sessions import DEFAULT_SESSION, Session, SessionConfig, pick_session

__all__ = ["Identities", "SessionStore", "session_key"]

#: seconds a worker trusts its copy of a key's sessions before it reads the store's again
RELOAD_EVERY = 5.0


class SessionStore(Protocol):
    """Where sessions live fleet-wide (the queue store)."""

    async def load_sessions(self, job: str, key: str) -> list[str]:
        """The JSON of the job's live sessions of ``key``."""
        ...

    async def save_sessions(self, job: str, rows: Sequence[tuple[str, str, str, bool]]) -> None:
        """Upsert ``(key, session id, JSON, retired)`` rows."""
        ...


def session_key(route: Route | None, config: RoutesConfig | None) -> str:
    """The key a route's sessions are kept under (see the module docstring)."""
    if route is None or route.is_direct:
        return DIRECT
    if config is not None:
        for pool in config.pools:
            if pool.name == route.pool:
                return route.id if pool.mode is PoolMode.STICKY else pool.name
    return route.id


@dataclass
class _Keyed:
    sessions: dict[str, Session]
    loaded_at: float
    config: SessionConfig


class Identities:
    """The sessions of one worker (see the module docstring)."""

    def __init__(
        self,
        store: SessionStore,
        *,
        user_agent: str,
        routes: RoutesConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.user_agent = user_agent
        self.routes = routes
        self.clock = clock
        self._keys: dict[tuple[str, str], _Keyed] = {}
        self._dirty: dict[tuple[str, str], dict[str, Session]] = {}

    def _config(self, route: Route | None) -> SessionConfig:
        if route is not None and self.routes is not None:
            for pool in self.routes.pools:
                if pool.name == route.pool:
                    return SessionConfig.for_pool(pool)
        return DEFAULT_SESSION

    async def pick(
        self,
        job: str,
        route: Route | None,
        name: str | None = None,
        *,
        since: float = 0.0,
        follow: str | None = None,
    ) -> Session:
        """A usable session for an attempt of ``job`` through ``route``; ``name``: the session
        the request names (``meta["cookiejar"]``), made if there is none of that name;
        ``follow``: the session of the page that yielded the request (see the module
        docstring), used if this key has it usable. Both as the store had them at ``since``
        (when the request was leased) or later."""
        key = (job, session_key(route, self.routes))
        now = self.clock()
        keyed = self._keys.get(key)
        wanted = name is not None or follow is not None
        stale = wanted and keyed is not None and keyed.loaded_at < since
        if keyed is None or stale or now - keyed.loaded_at >= RELOAD_EVERY:
            keyed = await self._load(key, route, now)
        if name is not None:
            named = keyed.sessions.get(name)
            if named is None or named.retire_reason(now, keyed.config) is not None:
                named = self._fresh(key, keyed, route, now, name)
            return self._keep(key, keyed, named)
        followed = keyed.sessions.get(follow) if follow is not None else None
        if followed is not None and followed.usable(now, keyed.config):
            return followed if keyed.config.rotate_followed else self._keep(key, keyed, followed)
        session = pick_session(list(keyed.sessions.values()), now, config=keyed.config)
        if session is not None:
            return session
        return self._fresh(key, keyed, route, now, secrets.token_hex(8))

    def _keep(self, key: tuple[str, str], keyed: _Keyed, session: Session) -> Session:
        """``session`` marked named: kept past its use and age limits."""
        if session.named:
            return session
        session = replace(session, named=True)
        keyed.sessions[session.id] = self._dirty.setdefault(key, {})[session.id] = session
        return session

    def _fresh(
        self, key: tuple[str, str], keyed: _Keyed, route: Route | None, now: float, sid: str
    ) -> Session:
        fresh = Session.new(sid, route or Route(DIRECT, DIRECT), now, user_agent=self.user_agent)
        keyed.sessions[fresh.id] = fresh
        self._dirty.setdefault(key, {})[fresh.id] = fresh
        return fresh

    async def _load(self, key: tuple[str, str], route: Route | None, now: float) -> _Keyed:
        stored = [Session.from_json(_loads(doc)) for doc in await self.store.load_sessions(*key)]
        mine = self._keys.get(key)
        sessions = {s.id: s for s in stored}
        for sid, local in (mine.sessions if mine else {}).items():
            # this worker's own changes not yet saved win over the store's older copy; a saved
            # session the store no longer has was retired by another worker
            if sid in self._dirty.get(key, {}):
                sessions[sid] = local
        keyed = _Keyed(sessions, now, self._config(route))
        self._keys[key] = keyed
        return keyed

    def after(
        self,
        job: str,
        route: Route | None,
        session: Session,
        *,
        url: str,
        set_cookies: Sequence[str],
        outcome: str,
        hop_cookies: Sequence[tuple[str, str]] = (),
    ) -> Session:
        """Fold one attempt into ``session``: its cookies (``hop_cookies``: ``(url, Set-Cookie)``
        of the redirects before ``url``), then ``ok`` (good), ``blocked`` (retired: the site
        knows this identity), ``error`` (bad: the identity may be at fault) or anything else
        (a use, neither good nor bad). Returns the new value."""
        key = (job, session_key(route, self.routes))
        now = self.clock()
        keyed = self._keys.get(key)
        config = keyed.config if keyed else DEFAULT_SESSION
        current = keyed.sessions.get(session.id, session) if keyed else session
        for hop, cookie in hop_cookies:
            current = current.with_cookies([cookie], hop, now)
        if set_cookies:
            current = current.with_cookies(set_cookies, url, now)
        if outcome == "blocked":
            current = current.retire(now, "block")
        elif outcome == "ok":
            current = current.mark_good(now, config)
        elif outcome == "error":
            current = current.mark_bad(now, config)
        else:
            current = replace(current, uses=current.uses + 1, last_used_at=now)
        if keyed is not None:
            keyed.sessions[current.id] = current
        self._dirty.setdefault(key, {})[current.id] = current
        return current

    async def flush(self) -> None:
        """Save the sessions changed since the last flush."""
        dirty, self._dirty = self._dirty, {}
        by_job: dict[str, list[tuple[str, str, str, bool]]] = {}
        now = self.clock()
        for (job, key), sessions in dirty.items():
            keyed = self._keys.get((job, key))
            config = keyed.config if keyed else DEFAULT_SESSION
            for s in sessions.values():
                done = not s.usable(now, config)
                by_job.setdefault(job, []).append((key, s.id, _dumps(s), done))
                if done and keyed is not None:
                    keyed.sessions.pop(s.id, None)
        for job, rows in by_job.items():
            await self.store.save_sessions(job, rows)


def _dumps(session: Session) -> str:
    return json.dumps(session.to_json(), separators=(",", ":"))


def _loads(document: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(document)
    return data
