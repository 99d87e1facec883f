"""The ClientHello gate of the tests (tests/sites/gate.py) as a process of its own, in front of
a TLS site (nginx, for the benchmarks): browser-like hellos reach the site, others a challenge
server (403, Cloudflare's markers) with the same certificate.

    python benchmarks/gate_server.py --site 127.0.0.1:8443 --cert cert.pem --key key.pem

Prints ``listening PORT`` and serves until SIGTERM; on SIGTERM it prints how many connections
it passed and refused (``passed N refused M``).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import ssl
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sites.gate import start_challenge, start_gate


async def serve(site: tuple[str, int], cert: str, key: str) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    runner, challenge_port = await start_challenge(context)
    gate = await start_gate(site, ("127.0.0.1", challenge_port))
    print(f"listening {gate.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print(f"passed {gate.passed} refused {gate.refused}", flush=True)
    await gate.close()
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", required=True, help="HOST:PORT of the TLS site")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args()
    host, _, port = args.site.rpartition(":")
    asyncio.run(serve((host, int(port)), args.cert, args.key))


if __name__ == "__main__":
    main()
