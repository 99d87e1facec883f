"""Several hosts: workers in their own network namespaces, one host cut off mid-crawl.

The host keeps PostgreSQL (reached through a TCP forwarder, since it listens on 127.0.0.1 only)
and the demo shop on a service address of its own. Each "machine" is a network namespace
with a veth pair to the host and its own address; it reaches that service address through its
veth. Cutting a machine's link (host side of its veth down) is a network partition: its worker
can reach neither the store nor the shop, its leases expire, and the other machines take over.

Needs root (``ip netns``); CI runs as root.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from tests.conftest import PG_DSN
from tests.integration.helpers import CRAWLFLEET, demo_shop, read_jsonl, run, wait_for

from crawlfleet.demo.catalog import Catalog

pytestmark = pytest.mark.slow

# A TCP forwarder standing in for the network between a machine and PostgreSQL. When the
# machine's side of a connection dies (unacknowledged data for 3 s, or 3 lost keepalives), it
# closes the PostgreSQL side too, as a server with tcp_user_timeout / TCP keepalives would: the
# backend then rolls back whatever transaction the lost machine had open, freeing its row locks.
FORWARDER = r"""
import asyncio, socket, sys

listen_host, target_host, target_port = sys.argv[1], sys.argv[2], int(sys.argv[3])

async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()

async def handle(down_r, down_w):
    sock = down_w.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 3000)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
    try:
        up_r, up_w = await asyncio.open_connection(target_host, target_port)
    except OSError:
        down_w.close()
        return
    await asyncio.gather(pipe(down_r, up_w), pipe(up_r, down_w))

async def main():
    server = await asyncio.start_server(handle, listen_host, 0)
    print("listening", server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main())
"""


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def free_subnets(n: int) -> list[int]:
    """``n`` third octets X with no 10.201.X.0/24 address on this machine yet."""
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    taken = {int(a.split(".")[2]) for a in out.split() if a.startswith("10.201.")}
    free = [x for x in range(1, 250) if x not in taken]
    rng = secrets.SystemRandom()
    return rng.sample(free, n)


@dataclass
class Hosts:
    """Network namespaces ("machines") with veth links to the host, and a service address."""

    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    service: str = ""  # the host's address every machine reaches PostgreSQL and the shop on
    machines: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (netns, veth)
    service_if: str = ""

    def setup(self, names: list[str]) -> None:
        octets = free_subnets(len(names) + 1)
        # the service address lives on a veth pair of its own (no dummy interfaces in CI kernels)
        self.service_if = f"cfs{self.tag}"
        ip("link", "add", self.service_if, "type", "veth", "peer", "name", f"cfs{self.tag}p")
        self.service = f"10.201.{octets[0]}.1"
        ip("addr", "add", f"{self.service}/32", "dev", self.service_if)
        ip("link", "set", f"cfs{self.tag}p", "up")
        ip("link", "set", self.service_if, "up")
        for name, x in zip(names, octets[1:], strict=True):
            ns, host_if, peer = (
                f"cf{self.tag}{name}",
                f"cfh{self.tag}{name}",
                f"cfp{self.tag}{name}",
            )
            ip("netns", "add", ns)
            self.machines[name] = (ns, host_if)
            ip("link", "add", host_if, "type", "veth", "peer", "name", peer)
            ip("link", "set", peer, "netns", ns)
            ip("addr", "add", f"10.201.{x}.1/24", "dev", host_if)
            ip("link", "set", host_if, "up")
            ip("-n", ns, "addr", "add", f"10.201.{x}.2/24", "dev", peer)
            ip("-n", ns, "link", "set", peer, "up")
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "route", "add", f"{self.service}/32", "via", f"10.201.{x}.1")

    def cut(self, name: str) -> None:
        ip("link", "set", self.machines[name][1], "down")

    def exec_prefix(self, name: str) -> list[str]:
        return ["ip", "netns", "exec", self.machines[name][0]]

    def teardown(self) -> None:
        for ns, host_if in self.machines.values():
            subprocess.run(["ip", "link", "del", host_if], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if self.service_if:
            subprocess.run(["ip", "link", "del", self.service_if], capture_output=True)


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    if os.geteuid() != 0:
        pytest.fail("the multi-host test needs root for ip netns (CI runs as root)")
    h = Hosts()
    try:
        yield h
    finally:
        h.teardown()


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A schema of its own in the test server's database, dropped after the test."""
    name = f"fleet_{secrets.token_hex(4)}"
    try:
        yield name
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=30)


def queue_url(host: str, port: int, schema: str) -> str:
    parts = urlsplit(PG_DSN)
    netloc = f"{parts.username or 'postgres'}@{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc, query=f"schema={schema}"))


def test_workers_on_three_hosts__one_cut_off_mid_crawl__others_finish_every_record_once(
    tmp_path: Path, hosts: Hosts, pg_schema: str
) -> None:
    catalog = Catalog(1500)
    hosts.setup(["a", "b", "c"])
    (tmp_path / "crawlfleet.toml").write_text(
        "[worker]\nlease_ttl = 5\nfetch_timeout = 3\nconcurrency = 32\n"
    )
    forwarder = subprocess.Popen(
        [sys.executable, "-c", FORWARDER, hosts.service, "127.0.0.1", str(urlsplit(PG_DSN).port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    procs: dict[str, subprocess.Popen[str]] = {}
    shop_args = ("--host", hosts.service, "--products", "1500", "--slow", "0.05")
    try:
        assert forwarder.stdout is not None
        fwd_port = int(forwarder.stdout.readline().split()[1])
        with demo_shop(*shop_args, "--slow-delay", "0.2") as base:
            assert urlsplit(base).hostname == hosts.service
            # submitted from a path that no machine has afterwards: workers find it by name
            submitted = tmp_path / "laptop"
            submitted.mkdir()
            spider_src = (
                "from crawlfleet.demo.spider import DemoShop\n\n\n"
                f"class Shop(DemoShop):\n    start_urls = [{base + '/'!r}]\n"
            )
            (submitted / "shop.py").write_text(spider_src)
            local_queue = queue_url("127.0.0.1", urlsplit(PG_DSN).port or 5432, pg_schema)
            result = run(["db", "upgrade", "--queue", local_queue], tmp_path, timeout=60)
            assert result.returncode == 0, result.stderr
            result = run(
                ["submit", str(submitted / "shop.py"), "--queue", local_queue], tmp_path, timeout=60
            )
            assert result.returncode == 0, result.stderr
            (submitted / "shop.py").unlink()
            fleet_spiders = tmp_path / "spiders"
            fleet_spiders.mkdir()
            (fleet_spiders / "shop.py").write_text(spider_src)

            remote_queue = queue_url(hosts.service, fwd_port, pg_schema)
            for name in ("a", "b", "c"):
                procs[name] = subprocess.Popen(
                    [
                        *hosts.exec_prefix(name),
                        *CRAWLFLEET,
                        "worker",
                        "--queue",
                        remote_queue,
                        "--spiders",
                        str(fleet_spiders),
                        "--worker-id",
                        f"host-{name}",
                        "--exit-when-finished",
                    ],
                    cwd=tmp_path,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )

            db = psycopg.connect(PG_DSN, autocommit=True)
            db.execute(f'SET search_path TO "{pg_schema}"')

            def held_by_a() -> list[int]:
                rows = db.execute(
                    "SELECT id FROM requests WHERE state = 'leased' AND lease_owner = 'host-a'"
                ).fetchall()
                return [r[0] for r in rows]

            def mid_crawl() -> bool:
                for name, proc in procs.items():
                    if proc.poll() is not None:
                        _, err = proc.communicate()
                        raise AssertionError(f"worker {name} exited early: {err[-3000:]}")
                done = db.execute("SELECT count(*) FROM requests WHERE state = 'done'").fetchone()
                return done is not None and done[0] >= 200 and len(held_by_a()) >= 5

            try:
                wait_for(mid_crawl, 90, "host a holding leases mid-crawl")
                hosts.cut("a")
                time.sleep(0.5)  # whatever host a had sent before the cut has landed
                stranded = held_by_a()
                for name in ("b", "c"):
                    _, err = procs[name].communicate(timeout=240)
                    assert procs[name].returncode == 0, err[-3000:]
                assert procs["a"].poll() is None, "the cut-off worker cannot have finished"

                rows = db.execute(
                    "SELECT r.state, r.attempts, "
                    "       (SELECT count(*) FROM attempts a"
                    "        WHERE a.request_id = r.id AND a.outcome = 'lease_expired')"
                    " FROM requests r WHERE r.id = ANY(%s)",
                    (stranded,),
                ).fetchall()
                unfinished = db.execute(
                    "SELECT count(*) FROM requests WHERE state IN ('queued', 'leased')"
                ).fetchone()
                dead = db.execute(
                    "SELECT dead_reason, count(*) FROM requests WHERE state = 'dead' GROUP BY 1"
                ).fetchall()
            finally:
                db.close()

            status = run(["status", "--queue", local_queue, "--json"], tmp_path, timeout=60)
            assert status.returncode == 0, status.stderr
            out = tmp_path / "records.jsonl"
            export = run(["export", "--queue", local_queue, "-o", str(out)], tmp_path, timeout=60)
            assert export.returncode == 0, export.stderr
    finally:
        for proc in procs.values():
            stop(proc)
        stop(forwarder)

    # host a's leases were taken over once they expired, and crawled by the others
    assert stranded, "host a held leases when it was cut off"  # (it may land a last report)
    assert len(rows) == len(stranded)
    assert all(
        state == "done" and attempts >= 2 and expired >= 1 for state, attempts, expired in rows
    )
    assert unfinished == (0,)
    assert {reason for reason, _ in dead} <= {"robots"}
    [job] = json.loads(status.stdout)
    assert (job["finished"], job["state"], job["job_state"]) == (True, "finished", "running")

    records = read_jsonl(out)
    skus = [r["sku"] for r in records]
    assert len(skus) == len(set(skus)), "a record appears twice"
    expected = {r["sku"]: r for r in catalog.expected_records()}
    assert {r["sku"]: r for r in records} == expected
