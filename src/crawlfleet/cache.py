"""Bounded in-memory caches: what a worker remembers of a crawl, within a memory budget.

A worker's caches are caches: the store's unique key is the truth, so a cache may forget
anything at any time and a miss costs only work (a link resolved again, a duplicate the store
filters), never a page or a record. Their size is set by ``[worker] cache_memory`` (bytes), not
by how many URLs a crawl discovers: :func:`sizes` turns the budget into entry counts. The budget
is the worker's: a worker running several jobs splits it among them (:func:`share`).

:class:`BoundedSet` and :class:`BoundedMap` forget the least recently used keys first, nearly:
keys live in two generations, a new one and an old one; when the new one is full the old one is
dropped whole and the new one becomes old, and a hit in the old generation moves its key to the
new one. Every operation is one or two lookups in a built-in set or dict (the hot path of link
discovery), and at most ``capacity`` keys are held.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

__all__ = [
    "DEFAULT_CACHE_MEMORY",
    "MIN_CACHE_MEMORY",
    "BoundedMap",
    "BoundedSet",
    "CacheSizes",
    "share",
    "sizes",
]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: the default ``[worker] cache_memory``: 64 MiB
DEFAULT_CACHE_MEMORY: Final = 64 << 20
#: the least ``cache_memory`` a worker accepts: 1 MiB
MIN_CACHE_MEMORY: Final = 1 << 20

# Bytes one entry costs in CPython (measured with tracemalloc on URLs of ~60 characters, table
# slack of built-in sets and dicts included), and the share of the budget each cache gets.
_SEEN_ENTRY: Final = 80  # an 8-byte int key
_HANDLED_ENTRY: Final = 160  # a link key (an absolute URL string, or a (base, href) tuple)
_LINK_ENTRY: Final = 480  # a link key and its (canonical URL, fingerprint, host)
_CAPTURE_ENTRY: Final = 560  # a content hash and its WARC capture (record id, file, URL)
_SHARES: Final = {"seen": 0.35, "handled": 0.25, "links": 0.3, "captures": 0.1}


@dataclass(frozen=True, slots=True)
class CacheSizes:
    """Entries each of a job's caches may hold (see :func:`sizes`)."""

    seen: int
    handled: int
    links: int
    captures: int


def share(memory: int, jobs: int) -> int:
    """Each job's part of a worker's ``cache_memory`` when it runs ``jobs`` jobs: the budget is
    the worker's, however many jobs it serves."""
    return memory // max(1, jobs)


def sizes(memory: int) -> CacheSizes:
    """How many entries each cache of a job may hold within ``memory`` bytes: request
    fingerprints seen, link keys judged, links resolved, and archived payloads."""
    per = {"seen": _SEEN_ENTRY, "handled": _HANDLED_ENTRY, "links": _LINK_ENTRY}
    per["captures"] = _CAPTURE_ENTRY
    return CacheSizes(**{k: max(16, int(memory * _SHARES[k]) // per[k]) for k in _SHARES})


class BoundedSet(Generic[K]):
    """A set of at most ``capacity`` keys that forgets the least recently used first (nearly:
    two generations, see the module docstring)."""

    __slots__ = ("_half", "_new", "_old", "capacity")

    def __init__(self, capacity: int) -> None:
        if capacity < 2:
            raise ValueError("a bounded set holds at least 2 keys")
        self.capacity = capacity
        self._half = capacity // 2
        self._new: set[K] = set()
        self._old: set[K] = set()

    def __contains__(self, key: object) -> bool:
        if key in self._new:
            return True
        if key in self._old:
            self._old.discard(key)
            self._put(key)
            return True
        return False

    @property
    def recent(self) -> set[K]:
        """The keys of the new generation (a hit there changes nothing): a caller testing many
        keys in a row may look there first, at C speed, and ask ``in`` for the rest. Read it
        again after any other call: that may have turned the generations."""
        return self._new

    def add(self, key: K) -> None:
        # a key of the old generation may be added to the new one too: each holds at most
        # half the capacity, and the old copy goes when its generation does
        self._put(key)

    def add_new(self, key: K) -> bool:
        """``key not in self`` and then ``add(key)``, in one call (the hot path of link
        discovery): True if the key was not held."""
        new = self._new
        if key in new:
            return False
        old = self._old
        if key in old:
            old.discard(key)
            self._put(key)
            return False
        new.add(key)
        if len(new) >= self._half:
            self._old, self._new = new, set()
        return True

    def _put(self, key: K) -> None:
        new = self._new
        new.add(key)
        if len(new) >= self._half:
            self._old, self._new = new, set()

    def resize(self, capacity: int) -> None:
        """Hold at most ``capacity`` keys from now on (a smaller one forgets at once)."""
        if capacity < 2:
            raise ValueError("a bounded set holds at least 2 keys")
        self.capacity, self._half = capacity, capacity // 2
        if len(self._old) > self._half:
            self._old = set()
        if len(self._new) >= self._half:
            self._old, self._new = (self._new if len(self._new) <= self._half else set()), set()

    def discard(self, key: K) -> None:
        self._new.discard(key)
        self._old.discard(key)

    def clear(self) -> None:
        self._new, self._old = set(), set()

    def __len__(self) -> int:
        """Keys held, a key in both generations counted twice (at most ``capacity``)."""
        return len(self._new) + len(self._old)


_MISS: Final = object()


class BoundedMap(Generic[K, V]):
    """A mapping of at most ``capacity`` keys that forgets the least recently used first
    (nearly: two generations, see the module docstring)."""

    __slots__ = ("_half", "_new", "_old", "capacity")

    def __init__(self, capacity: int) -> None:
        if capacity < 2:
            raise ValueError("a bounded map holds at least 2 keys")
        self.capacity = capacity
        self._half = capacity // 2
        self._new: dict[K, V] = {}
        self._old: dict[K, V] = {}

    def get(self, key: K, default: object = None) -> V | object:
        """The value of ``key``, or ``default`` (a hit in the old generation moves it up)."""
        value = self._new.get(key, _MISS)
        if value is not _MISS:
            return value
        value = self._old.pop(key, _MISS)
        if value is _MISS:
            return default
        self._put(key, value)  # type: ignore[arg-type]
        return value

    def put(self, key: K, value: V) -> None:
        self._old.pop(key, None)
        self._put(key, value)

    def _put(self, key: K, value: V) -> None:
        new = self._new
        new[key] = value
        if len(new) >= self._half:
            self._old, self._new = new, {}

    def resize(self, capacity: int) -> None:
        """Hold at most ``capacity`` keys from now on (a smaller one forgets at once)."""
        if capacity < 2:
            raise ValueError("a bounded map holds at least 2 keys")
        self.capacity, self._half = capacity, capacity // 2
        if len(self._old) > self._half:
            self._old = {}
        if len(self._new) >= self._half:
            self._old, self._new = (self._new if len(self._new) <= self._half else {}), {}

    def clear(self) -> None:
        self._new, self._old = {}, {}

    def __len__(self) -> int:
        return len(self._new) + len(self._old)
