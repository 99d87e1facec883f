"""Real proxy servers for tests: Debian's tinyproxy (HTTP, CONNECT) and microsocks (SOCKS5).

Each one listens on 127.0.0.1 on a free port and leaves from its own source address (127.0.0.2,
127.0.0.3, ...: tinyproxy ``Bind``, microsocks ``-b``), so a server behind them can tell the
routes apart by client address. ``scripts/test`` installs both packages.

::

    with proxy_fleet(tmp_path, http=2, socks=2, auth=(0,)) as fleet:
        fleet.http[0].url      # http://route:<password>@127.0.0.1:PORT (leaves from 127.0.0.2)
        fleet.socks[1].stop()  # killed: connections are refused
        fleet.socks[1].start() # back on the same port
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

TINYPROXY = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"
MICROSOCKS = shutil.which("microsocks") or "/usr/bin/microsocks"
USER = "route"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"proxy exited with {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"proxy not listening on {port} after {timeout}s")


@dataclass
class ProxyServer:
    """One proxy process; ``url`` carries the credentials when it has some."""

    kind: str  # "http" or "socks5"
    port: int
    source: str
    workdir: Path
    password: str | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        auth = f"{USER}:{self.password}@" if self.password else ""
        return f"{self.kind}://{auth}127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        if self.kind == "socks5":
            auth = ["-u", USER, "-P", self.password] if self.password else []
            return [MICROSOCKS, "-i", "127.0.0.1", "-p", str(self.port), "-b", self.source, *auth]
        return [TINYPROXY, "-d", "-c", str(self._tinyproxy_config())]

    def _tinyproxy_config(self) -> Path:
        lines = [
            f"Port {self.port}",
            "Listen 127.0.0.1",
            f"Bind {self.source}",
            "Timeout 30",
            "MaxClients 200",
            "LogLevel Warning",
            f'LogFile "{self.workdir / "tinyproxy.log"}"',
            "DisableViaHeader Yes",
            "XTinyproxy No",
        ]
        if self.password:
            lines.append(f"BasicAuth {USER} {self.password}")
        path = self.workdir / "tinyproxy.conf"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _wait_listening(self.port, self.proc)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


@dataclass
class ProxyFleet:
    http: list[ProxyServer]
    socks: list[ProxyServer]

    @property
    def all(self) -> list[ProxyServer]:
        return [*self.http, *self.socks]


@contextlib.contextmanager
def proxy_fleet(
    workdir: Path, *, http: int = 1, socks: int = 1, auth: Sequence[int] = ()
) -> Iterator[ProxyFleet]:
    """Start ``http`` tinyproxy and ``socks`` microsocks instances; the ones whose index (over
    all of them, HTTP first) is in ``auth`` require a username and a random password."""
    servers: list[ProxyServer] = []
    try:
        for index in range(http + socks):
            kind = "http" if index < http else "socks5"
            server = ProxyServer(
                kind=kind,
                port=free_port(),
                source=f"127.0.0.{index + 2}",
                workdir=workdir / f"proxy-{index}",
                password=f"pw-{secrets.token_hex(8)}" if index in auth else None,
            )
            servers.append(server)
            server.start()
        yield ProxyFleet(servers[:http], servers[http:])
    finally:
        for server in servers:
            server.stop()
