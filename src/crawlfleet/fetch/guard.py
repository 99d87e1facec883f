"""The address guard: which IP addresses a fetch may connect to.

A crawler follows links written by strangers, so a page can point it at ``http://127.0.0.1/``,
``http://169.254.169.254/`` (cloud metadata) or a name that resolves to the LAN (SSRF). The
guard refuses those unless the spider allows private addresses or the host was named in
``start_urls``. It runs twice:

* on the URL, for hosts that are IP literals, including the legacy decimal, octal and hex forms
  (``2130706433``, ``0177.0.0.1``, ``0x7f.1``) that ``inet_aton``-style resolvers accept;
* in :class:`GuardedResolver`, on the addresses DNS returned, i.e. the ones the connector will
  actually connect to. Checking at connect time (not in a pre-flight lookup) means a name that
  rebinds from a public address to loopback between two lookups cannot slip through.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from functools import lru_cache
from typing import Protocol

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from crawlfleet.errors import AddressRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

# Everything that is not ordinary public unicast. Listed rather than taken from
# ``ip.is_global`` because that property changed meaning between Python releases.
_REFUSED_V4: tuple[ipaddress.IPv4Network, ...] = (
    _V4("0.0.0.0/8"),  # "this network"; 0.0.0.0 reaches localhost on Linux
    _V4("10.0.0.0/8"),  # RFC 1918
    _V4("100.64.0.0/10"),  # CGNAT shared space (RFC 6598)
    _V4("127.0.0.0/8"),  # loopback
    _V4("169.254.0.0/16"),  # link-local, cloud metadata endpoints
    _V4("172.16.0.0/12"),  # RFC 1918
    _V4("192.0.0.0/24"),  # IETF protocol assignments
    _V4("192.0.2.0/24"),  # documentation
    _V4("192.168.0.0/16"),  # RFC 1918
    _V4("198.18.0.0/15"),  # benchmarking
    _V4("198.51.100.0/24"),  # documentation
    _V4("203.0.113.0/24"),  # documentation
    _V4("224.0.0.0/4"),  # multicast
    _V4("240.0.0.0/4"),  # reserved, and 255.255.255.255 broadcast
)
_REFUSED_V6: tuple[ipaddress.IPv6Network, ...] = (
    _V6("::/128"),  # unspecified
    _V6("::1/128"),  # loopback
    _V6("100::/64"),  # discard-only
    _V6("2001:db8::/32"),  # documentation
    _V6("fc00::/7"),  # unique local (ULA)
    _V6("fe80::/10"),  # link-local
    _V6("fec0::/10"),  # deprecated site-local, still routed on some LANs
    _V6("ff00::/8"),  # multicast
)
# IPv6 forms that carry an IPv4 address inside: judge the embedded address instead.
_NAT64 = _V6("64:ff9b::/96")
_IPV4_COMPATIBLE = _V6("::/96")


class GuardSettings(Protocol):
    """The two settings the guard reads (``FetchSettings`` satisfies it)."""

    @property
    def allow_private_addresses(self) -> bool: ...

    @property
    def private_ok_hosts(self) -> frozenset[str]: ...


def parse_ip(host: str) -> IPAddress | None:
    """Return ``host`` as an IP address if it is one in any accepted spelling, else ``None``.

    Accepts IPv6 (with or without brackets) and IPv4 in the forms ``inet_aton`` accepts:
    one to four dot-separated parts, each decimal, octal (leading ``0``) or hex (``0x``).
    """
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    return _parse_legacy_ipv4(host.rstrip("."))


def _parse_legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers: list[int] = []
    for part in parts:
        number = _parse_ipv4_part(part)
        if number is None:
            return None
        numbers.append(number)
    # The last part fills all the bytes the earlier parts did not: "127.1" is 127.0.0.1.
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    value = last
    for index, number in enumerate(head):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _parse_ipv4_part(part: str) -> int | None:
    lowered = part.lower()
    try:
        if lowered.startswith("0x"):
            return int(lowered[2:] or "0", 16)
        if len(lowered) > 1 and lowered.startswith("0"):
            return int(lowered[1:], 8)
        return int(lowered, 10) if lowered.isdigit() else None
    except ValueError:
        return None


def is_public_address(ip: str | IPAddress) -> bool:
    """True if ``ip`` is ordinary public unicast; False for loopback, private, link-local,
    CGNAT, ULA, unspecified, multicast, reserved and the IPv4-in-IPv6 forms of those.

    Unparseable input is not public.
    """
    address = ip if isinstance(ip, IPAddress) else parse_ip(ip.split("%", 1)[0])
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return is_public_address(embedded)
        return not any(address in net for net in _REFUSED_V6)
    return not any(address in net for net in _REFUSED_V4)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def normalise_host(host: str) -> str:
    """Lower-case, without brackets or a trailing dot: the form ``private_ok_hosts`` holds."""
    return host.strip("[]").rstrip(".").lower()


def host_may_be_private(host: str, settings: GuardSettings) -> bool:
    """True if ``host`` may resolve to a non-public address under ``settings``."""
    if settings.allow_private_addresses:
        return True
    ok = settings.private_ok_hosts
    if not ok:
        return False
    name = normalise_host(host)
    if name in ok:
        return True
    # "0177.0.0.1" is allowed when "127.0.0.1" is: same address, different spelling.
    literal = parse_ip(name)
    return literal is not None and str(literal) in ok


def check_host(host: str, ips: Iterable[str], settings: GuardSettings) -> None:
    """Raise :class:`AddressRefused` if ``host`` (resolving to ``ips``) may not be fetched.

    A host is refused if *any* of its addresses is non-public: connecting to whichever public
    one happens to answer would still let DNS steer later connections inward.
    """
    if host_may_be_private(host, settings):
        return
    for ip in ips:
        if not is_public_address(ip):
            raise AddressRefused(f"{host} resolves to non-public address {ip}")


def check_literal_host(host: str, settings: GuardSettings) -> None:
    """Refuse ``host`` if it is a non-public IP literal (in any spelling); names pass."""
    address, public = _classify_literal(host)
    if address is None or public:
        return
    if not host_may_be_private(host, settings):
        raise AddressRefused(f"{host} is a non-public address ({address})")


@lru_cache(maxsize=4096)
def _classify_literal(host: str) -> tuple[IPAddress | None, bool]:
    # Runs for every URL on the hot path; hosts repeat a lot, so remember the verdict.
    address = parse_ip(host)
    return address, address is not None and is_public_address(address)


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that refuses non-public results, so the check holds for the
    address actually connected to.

    ``trust(host)`` exempts a host (used for configured proxies, which are the user's own).
    """

    def __init__(self, settings: GuardSettings, inner: AbstractResolver | None = None) -> None:
        self._settings = settings
        self._inner = inner if inner is not None else DefaultResolver()
        self._trusted: set[str] = set()

    def trust(self, host: str) -> None:
        self._trusted.add(normalise_host(host))

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        if normalise_host(host) not in self._trusted:
            check_host(host, [r["host"] for r in results], self._settings)
        return results

    async def close(self) -> None:
        await self._inner.close()
