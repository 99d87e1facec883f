"""[[routes.pool]] parsing, validation with one-line errors, masked credentials, pool choice."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.routes.pools import (
    DIRECT,
    Pool,
    PoolMode,
    Route,
    RoutesConfig,
    load_routes,
    parse_routes,
    route_plans,
    select_pools,
    tiers,
)

SECRET = "s3cr3t-pw"
CONFIG = f"""
[[routes.pool]]
name = "dc"
proxies = ["http://alice:{SECRET}@10.0.0.1:3128", "socks5://bob:{SECRET}@10.0.0.2:1080"]
proxies_file = "more.txt"
rate = 2
concurrency = 4
cost = 0.0001
tier = 1

[[routes.pool]]
name = "resi"
proxies = ["https://carol:{SECRET}@gw.resi.example:7000"]
mode = "sticky"
cost = 0.002
tier = 2
domains = ["shop.example"]
session_uses = 20

[[routes.pool]]
name = "login"
proxies = ["http://10.0.0.9:8080"]
spiders = ["accounts"]
"""


def parse(text: str, base: Path = Path()) -> RoutesConfig:
    return parse_routes(tomllib.loads(text), where="crawlfleet.toml", base_dir=base)


@pytest.fixture
def config(tmp_path: Path) -> RoutesConfig:
    (tmp_path / "more.txt").write_text(
        f"# spare proxies\n\nhttp://dave:{SECRET}@10.0.0.3:3128  # rack 2\n"
    )
    (tmp_path / "crawlfleet.toml").write_text(CONFIG)
    return load_routes(tmp_path / "crawlfleet.toml")


def test_pools_are_parsed_into_values_in_tier_order(config: RoutesConfig) -> None:
    assert config.names == [DIRECT, "login", "dc", "resi"]
    dc = config.pool("dc")
    assert (dc.mode, dc.rate, dc.concurrency, dc.cost, dc.tier) == (
        PoolMode.ROTATING,
        2.0,
        4,
        0.0001,
        1,
    )
    assert [r.scheme for r in dc.routes] == ["http", "socks5", "http"]
    assert dc.routes[2].proxy_url == f"http://dave:{SECRET}@10.0.0.3:3128"
    resi = config.pool("resi")
    assert (resi.mode, resi.domains, resi.session_uses) == (PoolMode.STICKY, ("shop.example",), 20)
    direct = config.pool(DIRECT)
    assert direct.routes == (Route(DIRECT, DIRECT),) and direct.routes[0].is_direct
    assert len(config.routes()) == 6


def test_route_ids_are_stable_and_ignore_the_password(config: RoutesConfig, tmp_path: Path) -> None:
    ids = [r.id for r in config.routes()]
    assert len(set(ids)) == len(ids)
    assert all(i == DIRECT or i.startswith(("dc/", "resi/", "login/")) for i in ids)
    rotated = (tmp_path / "crawlfleet.toml").read_text().replace(SECRET, "new-password")
    (tmp_path / "crawlfleet.toml").write_text(rotated)
    assert [r.id for r in load_routes(tmp_path / "crawlfleet.toml").routes()][:4] == ids[:4]
    assert ids[2] == "dc/" + ids[2].split("/")[1]  # the same in every process: a hash, no index
    assert SECRET not in "".join(ids)


def test_credentials_are_masked_in_every_repr_and_str(config: RoutesConfig) -> None:
    for text in (repr(config), str(config), repr(config.pool("dc")), str(config.routes()[2])):
        assert SECRET not in text
    assert "alice:[secure]@10.0.0.1:3128" in repr(config.pool("dc"))
    assert config.routes()[0].display == DIRECT


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[routes.pool]]\nname = "dc"\nproxys = ["http://h:1"]\n',
            re.escape("routes.pool[0]: unknown key 'proxys' (did you mean 'proxies'?)"),
        ),
        ("[routes]\npools = []\n", re.escape("routes: unknown key 'pools' (did you mean 'pool'?)")),
        ("[routes]\npool = 3\n", "must be an array of tables"),
        ('[[routes.pool]]\nname = "a b"\nproxies = ["http://h:1"]\n', "name must be"),
        ('[[routes.pool]]\nname = "dc"\n', r"\(dc\): no proxies"),
        ('[[routes.pool]]\nname = "direct"\nproxies = ["http://h:1"]\n', "has no proxies"),
        (
            f'[[routes.pool]]\nname = "dc"\nproxies = ["ftp://u:{SECRET}@h:21"]\n',
            r"proxies\[0\]: 'ftp://u:\[secure\]@h:21': scheme must be",
        ),
        (
            f'[[routes.pool]]\nname = "dc"\nproxies = ["http://u:{SECRET}@h"]\n',
            "needs a host and a port",
        ),
        ('[[routes.pool]]\nname = "dc"\nproxies = ["http://h:1/path"]\n', "no path or query"),
        ('[[routes.pool]]\nname = "dc"\nproxies = ["http://h:99999"]\n', "not a valid proxy URL"),
        ('[[routes.pool]]\nname = "dc"\nproxies = ["http://h:1", "http://h:1"]\n', "listed twice"),
        ('[[routes.pool]]\nname = "dc"\nproxies = ["http://h:1"]\nmode = "sticki"\n', "mode must"),
        ('[[routes.pool]]\nname = "dc"\nproxies = ["http://h:1"]\nrate = 0\n', "rate must be > 0"),
        (
            '[[routes.pool]]\nname = "dc"\nproxies = ["http://h:1"]\ncost = -1\n',
            "cost must be >= 0",
        ),
        (
            '[[routes.pool]]\nname = "dc"\nproxies = ["http://h:1"]\nconcurrency = 1.5\n',
            "concurrency must be a whole number",
        ),
        ('[[routes.pool]]\nname = "dc"\nproxies = ["http://h:1"]\ntier = -1\n', "tier must"),
        (
            '[[routes.pool]]\nname = "dc"\nproxies = ["http://h:1"]\ndomains = "a.example"\n',
            "domains must be a list",
        ),
        (
            '[[routes.pool]]\nname = "dc"\nproxies = ["http://h:1"]\nproxies_file = "nope.txt"\n',
            "cannot read proxies_file",
        ),
        (
            '[[routes.pool]]\nname = "dc"\nproxies = ["http://h:1"]\n'
            '[[routes.pool]]\nname = "dc"\nproxies = ["http://h:2"]\n',
            "a second pool named 'dc'",
        ),
    ],
)
def test_bad_config_is_one_clear_line_without_secrets(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse(text)
    assert "\n" not in str(info.value) and SECRET not in str(info.value)
    assert str(info.value).startswith("crawlfleet.toml: ")


def test_a_bad_line_in_a_proxies_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "p.txt").write_text(f"http://h:1\nsocks4://u:{SECRET}@h:2\n")
    with pytest.raises(ConfigError, match=r"p\.txt line 2: 'socks4://u:\[secure\]@h:2'"):
        parse('[[routes.pool]]\nname = "dc"\nproxies_file = "p.txt"\n', tmp_path)


def test_direct_can_be_tuned_or_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tuned = parse('[[routes.pool]]\nname = "direct"\nrate = 0.5\ntier = 3\n')
    assert tuned.pools == (Pool(DIRECT, (Route(DIRECT, DIRECT),), rate=0.5, tier=3),)
    off = parse(
        '[[routes.pool]]\nname = "direct"\nenabled = false\n'
        '[[routes.pool]]\nname = "dc"\nproxies = ["http://h:1"]\n'
    )
    assert off.names == ["dc"]
    monkeypatch.chdir(tmp_path)  # no crawlfleet.toml: only direct
    assert load_routes(None) == RoutesConfig() and RoutesConfig().names == [DIRECT]


def _names(pools: Any) -> list[str]:
    return [p.name for p in pools]


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"domain": "news.example"}, [DIRECT, "dc"]),  # general pools
        ({"domain": "shop.example"}, ["resi"]),  # the pool that names the domain
        ({"domain": "www.shop.example"}, ["resi"]),  # and its subdomains
        ({"domain": "notshop.example"}, [DIRECT, "dc"]),
        ({"domain": "news.example", "spider": "accounts"}, ["login"]),
        ({"domain": "shop.example", "spider": "accounts"}, ["login", "resi"]),
        ({"domain": "shop.example", "spider_pools": ["dc", "direct"]}, [DIRECT, "dc"]),
        ({"domain": "news.example", "spider_pools": ["resi"], "request_pools": "login"}, ["login"]),
        ({"domain": "news.example", "request_pools": ["resi", "dc"]}, ["dc", "resi"]),
    ],
)
def test_select_pools(config: RoutesConfig, kwargs: dict[str, Any], names: list[str]) -> None:
    assert _names(select_pools(config, **kwargs)) == names


def test_select_pools_refuses_unknown_names_and_unserved_domains(config: RoutesConfig) -> None:
    with pytest.raises(ConfigError, match=r"no route pool named 'rezi' \(did you mean 'resi'\?\)"):
        select_pools(config, domain="a.example", request_pools="rezi")
    only_claimed = parse(
        '[[routes.pool]]\nname = "direct"\nenabled = false\n'
        '[[routes.pool]]\nname = "dc"\nproxies = ["http://h:1"]\ndomains = ["a.example"]\n'
    )
    with pytest.raises(ConfigError, match=r"no route pool serves b\.example"):
        select_pools(only_claimed, domain="b.example")


def test_tiers_are_the_escalation_ladder(config: RoutesConfig) -> None:
    ladder = [(tier, _names(pools)) for tier, pools in tiers(config.pools)]
    assert ladder == [(0, [DIRECT, "login"]), (1, ["dc"]), (2, ["resi"])]


def test_route_plans__pools_a_job_does_not_use_come_pinned(config: RoutesConfig) -> None:
    """Any configured pool can be named by a request (``Request(pool=...)``): the job carries
    its routes too, pinned (only for the requests that name it)."""
    plans = route_plans(config, spider="shop", spider_pools=["dc"])
    assert {(p.pool, p.pinned) for p in plans} == {
        ("dc", False), (DIRECT, True), ("resi", True), ("login", True)
    }  # fmt: skip
    assert all(not p.domains for p in plans if p.pinned), "a pinned pool serves any domain"
    unnamed = route_plans(config, spider="shop")
    assert {p.pool for p in unnamed if p.pinned} == {"login"}, "login names another spider"
    assert route_plans(RoutesConfig()) == (), "direct alone: the store's own direct lane"
