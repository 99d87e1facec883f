"""The browsers the impersonating fetcher can pass for, and which one a session speaks as.

A **profile** is one of curl_cffi's impersonation targets (``chrome146``, ``safari2601``,
``firefox147``...): a browser version's TLS ClientHello (cipher suites, extensions and their
order, GREASE, ALPN), its HTTP/2 SETTINGS, window and pseudo-header order, and its default
headers (user agent, ``sec-ch-ua``, ``Accept``...), all consistent with each other.

A **family** (``chrome``, ``safari``, ``firefox``) stands for the newest desktop versions of that
browser the installed curl_cffi knows (:data:`FAMILY_SIZE` of them). A session speaks one
profile of its family for its whole life, picked from its id by a stable hash
(:func:`profile_for`): every worker, and every request of a sticky session, agrees without
storing anything, and a fleet's sessions spread over a few versions as real visitors do.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from typing import Final

__all__ = ["FAMILIES", "FAMILY_SIZE", "check_profile", "family_profiles", "profile_for"]

FAMILIES: Final = ("chrome", "safari", "firefox")
#: the newest versions of a family its sessions are spread over
FAMILY_SIZE: Final = 3
_DESKTOP: Final = re.compile(r"^(chrome|safari|firefox)(\d+)$")


@cache
def _targets() -> tuple[str, ...]:
    """Every impersonation target of the installed curl_cffi."""
    from curl_cffi.requests import BrowserType

    return tuple(str(b.value) for b in BrowserType)


@cache
def family_profiles(name: str) -> tuple[str, ...]:
    """The profiles ``name`` stands for: a family's newest desktop versions (newest first), or
    ``name`` itself when it is a target; ``ValueError`` otherwise."""
    if name in FAMILIES:
        versions = []
        for target in _targets():
            match = _DESKTOP.match(target)
            if match and match.group(1) == name:
                versions.append((int(match.group(2)), target))
        if not versions:
            raise ValueError(f"this curl_cffi has no {name} profile")
        return tuple(t for _, t in sorted(versions, reverse=True)[:FAMILY_SIZE])
    if name in _targets():
        return (name,)
    families = ", ".join(FAMILIES)
    raise ValueError(f"unknown browser profile {name!r} (a family: {families}; or a target)")


def check_profile(name: str) -> None:
    """Refuse a profile name that is neither a family nor a target (``ValueError``)."""
    if name in FAMILIES:
        return  # resolved when the fetcher starts (curl_cffi imported only where it runs)
    family_profiles(name)


def profile_for(session_id: str | None, name: str) -> str:
    """The profile a session speaks: one of ``name``'s, by a stable hash of its id (the newest
    for a request without a session)."""
    profiles = family_profiles(name)
    if session_id is None or len(profiles) == 1:
        return profiles[0]
    digest = hashlib.blake2b(session_id.encode(), digest_size=8).digest()
    return profiles[int.from_bytes(digest, "big") % len(profiles)]
