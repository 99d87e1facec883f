"""The browser trusts what every fetcher trusts: Chromium's own roots, and the authorities of
``SSL_CERT_FILE``, ``SSL_CERT_DIR`` and ``[fetch] ca_file`` (:mod:`crawlfleet.fetch.tls`).

Chromium on Linux does not read OpenSSL's files: it adds the certificates of the NSS database
in ``$HOME/.pki/nssdb`` to its roots. So a browser that must trust more is launched with a
``HOME`` of its own, whose database holds those authorities (made with NSS's ``certutil``,
Debian's ``libnss3-tools``), and verifies every certificate itself: an expired certificate or
another host's fails in the browser as it does in the other fetchers. Authorities the system's
bundle has already are left out (Chromium has its own roots).
"""

from __future__ import annotations

import logging
import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path
from typing import Final

from crawlfleet.errors import ConfigError
from crawlfleet.fetch.tls import Authorities

__all__ = ["CERTUTIL", "TrustHome", "make_trust_home"]

log = logging.getLogger(__name__)

CERTUTIL: Final = "certutil"
_BEGIN: Final = "-----BEGIN CERTIFICATE-----"
_END: Final = "-----END CERTIFICATE-----"


class TrustHome:
    """A ``HOME`` directory whose NSS database trusts some authorities; removed by :meth:`close`."""

    def __init__(self, path: Path, count: int) -> None:
        self.path = path
        self.count = count

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _certificates(text: str) -> list[str]:
    """The PEM certificates of a file's text, each as one PEM block."""
    out, rest = [], text
    while _BEGIN in rest:
        start = rest.index(_BEGIN)
        end = rest.find(_END, start)
        if end < 0:
            break
        out.append(rest[start : end + len(_END)] + "\n")
        rest = rest[end + len(_END) :]
    return out


def _system_ders() -> set[bytes]:
    paths = ssl.get_default_verify_paths()
    try:
        text = Path(paths.openssl_cafile).read_text("ascii", "replace")
    except OSError:
        return set()
    return {ssl.PEM_cert_to_DER_cert(pem) for pem in _certificates(text)}


def _extra_pems(authorities: Authorities) -> list[str]:
    system = _system_ders()
    seen: set[bytes] = set()
    out = []
    for path in authorities.pem_files():
        try:
            text = path.read_text("ascii", "replace")
        except OSError:
            continue
        for pem in _certificates(text):
            try:
                der = ssl.PEM_cert_to_DER_cert(pem)
            except ValueError:
                continue
            if der not in system and der not in seen:
                seen.add(der)
                out.append(pem)
    return out


def make_trust_home(authorities: Authorities, root: str | None = None) -> TrustHome | None:
    """A ``HOME`` for Chromium trusting ``authorities`` beyond the system's; None when there is
    nothing to add. Without ``certutil`` it raises :class:`ConfigError` naming the package."""
    pems = _extra_pems(authorities) if authorities else []
    if not pems:
        return None
    certutil = shutil.which(CERTUTIL)
    if certutil is None:
        raise ConfigError(
            "the browser cannot trust the authorities of SSL_CERT_FILE / SSL_CERT_DIR / "
            "[fetch] ca_file without NSS's certutil: apt-get install libnss3-tools"
        )
    home = Path(tempfile.mkdtemp(prefix="crawlfleet-browser-home-", dir=root))
    db = home / ".pki" / "nssdb"
    db.mkdir(parents=True)
    try:
        _run([certutil, "-N", "-d", f"sql:{db}", "--empty-password"])
        for i, pem in enumerate(pems):
            cert = home / f"ca-{i}.pem"
            cert.write_text(pem, "ascii")
            _run([certutil, "-A", "-d", f"sql:{db}", "-t", "C,,", "-n", f"ca-{i}", "-i", str(cert)])
            cert.unlink()
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(home, ignore_errors=True)
        raise ConfigError(f"cannot make the browser's certificate store: {exc}") from None
    log.debug("the browser trusts %d more authorities (%s)", len(pems), db)
    return TrustHome(home, len(pems))


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise subprocess.SubprocessError(message[-1] if message else f"exit {done.returncode}")
