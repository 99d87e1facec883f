"""Running the real thing in tests: the demo shop and the crawlfleet command as subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CRAWLFLEET = [sys.executable, "-m", "crawlfleet"]


@contextmanager
def demo_shop(*args: str) -> Iterator[str]:
    """Serve the demo shop in a subprocess (on 127.0.0.1 unless ``args`` name a --host); yields
    its base URL."""
    with demo_shops(0 if "--host" in args else 1, *args) as bases:
        yield bases[0]


@contextmanager
def demo_shops(hosts: int, *args: str) -> Iterator[list[str]]:
    """Serve one demo shop on ``hosts`` loopback addresses (127.0.0.1, 127.0.0.2, ...) at once:
    the same pages under several host names, plus those ``args`` name with --host. Yields their
    base URLs."""
    addresses = [arg for i in range(1, hosts + 1) for arg in ("--host", f"127.0.0.{i}")]
    hosts += args.count("--host")
    proc = subprocess.Popen(
        [sys.executable, "-m", "crawlfleet.demo.server", "--port", "0", *addresses, *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        bases = []
        for _ in range(hosts):
            line = proc.stdout.readline().strip()
            assert line.startswith("listening on "), line
            bases.append(line.removeprefix("listening on "))
        yield bases
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()


def shop_stats(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(base + "/__admin/stats", timeout=10) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def admin(base: str, action: str, payload: dict[str, Any] | None = None) -> None:
    data = json.dumps(payload or {}).encode()
    req = urllib.request.Request(base + "/__admin/" + action, data=data, method="POST")
    with urllib.request.urlopen(req, timeout=10):
        pass


def write_spider(path: Path, base: str, **attrs: Any) -> Path:
    extra = "".join(f"    {k} = {v!r}\n" for k, v in attrs.items())
    path.write_text(
        "from crawlfleet.demo.spider import DemoShop\n\n\n"
        "class Shop(DemoShop):\n"
        f"    start_urls = [{base + '/'!r}]\n" + extra
    )
    return path


def run(
    args: Sequence[str], cwd: Path, timeout: float = 300, **kw: Any
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, **kw.pop("env", {}))
    return subprocess.run(
        [*CRAWLFLEET, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        **kw,
    )


def start(args: Sequence[str], cwd: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CRAWLFLEET, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **env),
    )


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
