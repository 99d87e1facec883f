"""Run a throwaway nginx serving a directory on a free loopback port.

    base_url, stop = start_nginx(Path("benchmarks/out/site-5000"), access_log=Path("access.log"))
    ...
    stop()

``gzip=True`` answers clients that accept it with the ``.gz`` twin of a file where one exists
(``gzip_static``: see ``make_site.ensure_gzipped``), else compresses on the fly at level 1;
``tls=(cert, key)`` serves HTTPS instead of HTTP (``tests/tls.py`` makes a CA and a
certificate for 127.0.0.1).

Everything nginx writes (config, pid, error log, temp dirs) lives in its own temp directory; it
runs in the foreground (``daemon off``) as our child, so it cannot outlive a crashed benchmark by
much and needs no system paths. The access log, when asked for, is one line per request:
``<epoch seconds.millis> <status> <body bytes> <uri> <bytes sent, headers included>``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

CONFIG = """\
{user}worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    types {{ text/html html; text/plain txt; application/xml xml; }}
    default_type text/html;
    charset utf-8;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    log_format bench '$msec $status $body_bytes_sent $request_uri $bytes_sent';
    {access_log}
    {gzip}
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port}{ssl};
        {certificates}
        root {root};
        index index.html;
        location / {{ try_files $uri $uri.html $uri/ =404; }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_nginx(
    root: Path,
    *,
    access_log: Path | None = None,
    timeout: float = 10.0,
    gzip: bool = False,
    tls: tuple[Path, Path] | None = None,
    http2: bool = False,
) -> tuple[str, Callable[[], None]]:
    """Start nginx serving ``root``; returns its base URL and a function that stops it.
    ``tls`` is ``(certificate, key)``: HTTPS; ``http2`` offers HTTP/2 beside HTTP/1.1 (ALPN).

    Raises ``RuntimeError`` (with nginx's error log) if it does not come up in ``timeout`` s.
    """
    tmp = Path(tempfile.mkdtemp(prefix="bench-nginx-"))
    last_error = ""
    for _ in range(3):  # the free port may be taken between probing and nginx binding it
        port = free_port()
        conf = tmp / "nginx.conf"
        config = _config(root.resolve(), tmp, port, access_log, gzip=gzip, tls=tls, http2=http2)
        conf.write_text(config)
        proc = subprocess.Popen(
            [NGINX, "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: a forced stop takes the workers too
        )
        if _wait_listening(proc, port, timeout):
            scheme = "https" if tls else "http"
            return f"{scheme}://127.0.0.1:{port}", _stopper(proc, tmp)
        last_error = _reap(proc) + _read(tmp / "error.log")
    shutil.rmtree(tmp, ignore_errors=True)
    raise RuntimeError(f"nginx did not start: {last_error.strip()[-2000:]}")


GZIP = "gzip on; gzip_static on; gzip_comp_level 1; gzip_min_length 256;"


def _config(
    root: Path,
    tmp: Path,
    port: int,
    access_log: Path | None,
    *,
    gzip: bool = False,
    tls: tuple[Path, Path] | None = None,
    http2: bool = False,
) -> str:
    # A root master would switch its workers to "nobody", who may not read the site directory.
    user = "user root;\n" if os.geteuid() == 0 else ""
    log = (
        f"access_log {access_log.resolve()} bench buffer=256k flush=1s;"
        if access_log
        else "access_log off;"
    )
    certificates = (
        f"ssl_certificate {tls[0].resolve()}; ssl_certificate_key {tls[1].resolve()};"
        if tls
        else ""
    )
    return CONFIG.format(
        user=user,
        tmp=tmp,
        port=port,
        root=root,
        access_log=log,
        gzip=GZIP if gzip else "",
        ssl=(" ssl http2" if http2 else " ssl") if tls else "",
        certificates=certificates,
    )


def _wait_listening(proc: subprocess.Popen[str], port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


def _stopper(proc: subprocess.Popen[str], tmp: Path) -> Callable[[], None]:
    def stop() -> None:
        """Stop nginx (flushing its access log) and remove its temp directory."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)  # graceful shutdown: flushes the buffered access log
            with contextlib.suppress(subprocess.TimeoutExpired):  # then _reap kills it
                proc.wait(timeout=10)
        _reap(proc)
        shutil.rmtree(tmp, ignore_errors=True)

    return stop


def _reap(proc: subprocess.Popen[str]) -> str:
    """Kill nginx if it still runs (master and workers: SIGKILL to the master alone would orphan
    the workers) and return what it wrote to stderr."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=10)
    return err or ""


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
