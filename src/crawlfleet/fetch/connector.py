"""A connection pool whose idle keep-alive connections are bounded too.

aiohttp's ``limit`` counts the connections in use only: every connection given back stays open
for ``keepalive_timeout`` whatever their number. On a broad crawl (thousands of hosts, a few
pages each) that is one idle socket per host seen in the last seconds: thousands of descriptors
per worker, past a common ``ulimit -n 1024``. :class:`BoundedConnector` keeps at most
``max_idle`` of them, the most recently used: a host still being crawled reuses its connection
(it is used again before it is the oldest), the connection of a host whose work is done ages
out and is closed as soon as newer ones need the room. A worker's sockets are so at most
``limit + max_idle``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import aiohttp

if TYPE_CHECKING:
    from aiohttp.client_proto import ResponseHandler
    from aiohttp.client_reqrep import ConnectionKey

__all__ = ["BoundedConnector"]


class BoundedConnector(aiohttp.TCPConnector):
    """A :class:`aiohttp.TCPConnector` keeping at most ``max_idle`` idle connections."""

    def __init__(self, *, max_idle: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_idle = max(0, max_idle)
        #: idle connections given back, the oldest first (some were reused or closed since:
        #: dropped when met, so the memo is never bigger than ``max_idle``)
        self._idle: OrderedDict[ResponseHandler, ConnectionKey] = OrderedDict()

    def _release(
        self, key: ConnectionKey, protocol: ResponseHandler, *, should_close: bool = False
    ) -> None:
        super()._release(key, protocol, should_close=should_close)
        if self._closed or not protocol.is_connected():
            return
        self._idle[protocol] = key
        self._idle.move_to_end(protocol)
        while len(self._idle) > self.max_idle:
            old, old_key = self._idle.popitem(last=False)
            self._close_idle(old, old_key)

    def _close_idle(self, protocol: ResponseHandler, key: ConnectionKey) -> None:
        """Close ``protocol`` if it is still idle in the pool (not reused since)."""
        conns = self._conns.get(key)
        if not conns:
            return
        for item in conns:
            if item[0] is protocol:
                conns.remove(item)
                break
        else:
            return  # reused (in use now) or closed already
        if not conns:
            del self._conns[key]
        protocol.close()

    @property
    def idle(self) -> int:
        """Idle connections held now."""
        return sum(len(c) for c in self._conns.values())
