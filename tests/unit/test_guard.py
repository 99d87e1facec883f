"""The address guard as pure functions: which addresses are public, which hosts may be private."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from crawlfleet.errors import AddressRefused
from crawlfleet.fetch.guard import (
    GuardedResolver,
    check_host,
    check_literal_host,
    is_public_address,
    parse_ip,
)


@dataclass(frozen=True)
class Settings:
    allow_private_addresses: bool = False
    private_ok_hosts: frozenset[str] = field(default_factory=frozenset)


@pytest.mark.parametrize(
    ("ip", "public"),
    [
        ("93.184.216.34", True),
        ("8.8.8.8", True),
        ("2606:4700::1111", True),
        ("127.0.0.1", False),
        ("127.255.255.254", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("172.31.255.255", False),
        ("172.32.0.1", True),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # cloud metadata
        ("100.64.0.1", False),  # CGNAT
        ("100.127.255.255", False),
        ("100.128.0.1", True),
        ("0.0.0.0", False),
        ("224.0.0.1", False),  # multicast
        ("255.255.255.255", False),
        ("::", False),
        ("::1", False),
        ("fe80::1", False),
        ("fe80::1%eth0", False),
        ("fc00::1", False),
        ("fd12:3456::1", False),  # ULA
        ("ff02::1", False),
        ("::ffff:127.0.0.1", False),  # IPv4-mapped loopback
        ("::ffff:7f00:1", False),
        ("::ffff:169.254.169.254", False),
        ("::ffff:8.8.8.8", True),
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 of 169.254.169.254
        ("2002:7f00:1::1", False),  # 6to4 of 127.0.0.1
        ("2130706433", False),  # decimal 127.0.0.1
        ("0177.0.0.1", False),  # octal
        ("0x7f.0.0.1", False),  # hex
        ("0x7f000001", False),
        ("127.1", False),  # short form
        ("017700000001", False),  # octal, one part
        ("not-an-ip", False),
        ("", False),
    ],
)
def test_is_public_address(ip: str, public: bool) -> None:
    assert is_public_address(ip) is public


@pytest.mark.parametrize(
    ("host", "normalised"),
    [
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("10.0.0.1.", "10.0.0.1"),
        ("[::1]", "::1"),
        ("example.com", None),
        ("256.1.1.1", None),
        ("1.2.3.4.5", None),
        ("08.0.0.1", None),  # not valid octal: a name, as inet_aton says
        ("deadbeef", None),
    ],
)
def test_parse_ip_accepts_legacy_spellings(host: str, normalised: str | None) -> None:
    parsed = parse_ip(host)
    assert (str(parsed) if parsed else None) == normalised


@pytest.mark.parametrize(
    ("host", "ips", "settings", "refused"),
    [
        ("example.com", ["93.184.216.34"], Settings(), False),
        ("evil.example", ["127.0.0.1"], Settings(), True),
        ("evil.example", ["93.184.216.34", "10.0.0.1"], Settings(), True),  # any private one
        ("evil.example", ["::ffff:10.0.0.1"], Settings(), True),
        ("localhost", ["127.0.0.1", "::1"], Settings(), True),
        ("localhost", ["127.0.0.1"], Settings(private_ok_hosts=frozenset({"localhost"})), False),
        ("LOCALHOST.", ["127.0.0.1"], Settings(private_ok_hosts=frozenset({"localhost"})), False),
        ("other.lan", ["10.0.0.1"], Settings(private_ok_hosts=frozenset({"localhost"})), True),
        ("other.lan", ["10.0.0.1"], Settings(allow_private_addresses=True), False),
    ],
)
def test_check_host(host: str, ips: list[str], settings: Settings, refused: bool) -> None:
    if refused:
        with pytest.raises(AddressRefused):
            check_host(host, ips, settings)
    else:
        check_host(host, ips, settings)


@pytest.mark.parametrize(
    ("host", "ok_hosts", "refused"),
    [
        ("127.0.0.1", frozenset(), True),
        ("2130706433", frozenset(), True),
        ("0177.0.0.1", frozenset(), True),
        ("169.254.169.254", frozenset(), True),
        ("::1", frozenset(), True),
        ("8.8.8.8", frozenset(), False),
        ("example.com", frozenset(), False),  # names are the resolver's job
        ("127.0.0.1", frozenset({"127.0.0.1"}), False),
        ("0177.0.0.1", frozenset({"127.0.0.1"}), False),  # same address, other spelling
        ("127.0.0.2", frozenset({"127.0.0.1"}), True),
    ],
)
def test_check_literal_host(host: str, ok_hosts: frozenset[str], refused: bool) -> None:
    settings = Settings(private_ok_hosts=ok_hosts)
    if refused:
        with pytest.raises(AddressRefused):
            check_literal_host(host, settings)
    else:
        check_literal_host(host, settings)


class RebindingResolver(AbstractResolver):
    """Answers with a public address first, then loopback (DNS rebinding)."""

    def __init__(self) -> None:
        self.answers = ["93.184.216.34", "127.0.0.1"]

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        ip = self.answers.pop(0)
        return [ResolveResult(hostname=host, host=ip, port=port, family=family, proto=0, flags=0)]

    async def close(self) -> None:
        pass


async def test_resolver_checks_every_resolution_so_rebinding_is_refused() -> None:
    resolver = GuardedResolver(Settings(), RebindingResolver())
    first = await resolver.resolve("rebind.example", 80)
    assert first[0]["host"] == "93.184.216.34"
    with pytest.raises(AddressRefused):
        await resolver.resolve("rebind.example", 80)
    await resolver.close()


async def test_resolver_trusts_proxy_hosts() -> None:
    resolver = GuardedResolver(Settings(), RebindingResolver())
    resolver.trust("Proxy.Local")
    await resolver.resolve("proxy.local", 8080)
    assert (await resolver.resolve("proxy.local", 8080))[0]["host"] == "127.0.0.1"
