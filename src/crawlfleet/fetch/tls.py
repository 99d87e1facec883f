"""HTTPS as users meet it: the certificate authorities every fetcher trusts, what a certificate
error is called, and the warning when verification is off.

**Trust.** The HTTP, impersonating and browser fetchers trust the same authorities:

* the system's (OpenSSL's compiled-in paths: Debian's ``/etc/ssl/certs``);
* ``SSL_CERT_FILE`` (a PEM bundle) and ``SSL_CERT_DIR`` (directories of PEM files, ``:``
  separated) when set: added to the system's, never instead of them;
* ``[fetch] ca_file`` (a PEM bundle: a TLS-inspecting corporate proxy, a private CA).

:func:`ssl_context` builds the OpenSSL context of the HTTP fetcher; :func:`ca_bundle` writes the
same authorities into one PEM file for the impersonating fetcher (curl's ``CAINFO``), and
:func:`extra_authorities` lists what goes beyond the system's for the browser, whose Chromium
reads its own store (``crawlfleet.fetch.browser.trust``).

**Errors.** A handshake that fails on the certificate raises
:class:`~crawlfleet.errors.TlsError` with one of a few names (:data:`SELF_SIGNED`,
:data:`EXPIRED`, :data:`HOSTNAME`, :data:`UNKNOWN_CA`...), whichever fetcher met it, so a dead
letter reads ``tls_error: self-signed certificate (localhost:8443)``.

**Off.** ``tls_verify = False`` (a spider attribute, ``-s tls_verify=false``, ``[fetch]``) turns
verification off for sites with broken chains; :func:`warn_unverified` logs it once per host.
"""

from __future__ import annotations

import hashlib
import logging
import os
import ssl
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from crawlfleet.errors import TlsError

__all__ = [
    "EXPIRED",
    "HOSTNAME",
    "NOT_YET_VALID",
    "SELF_SIGNED",
    "UNKNOWN_CA",
    "Authorities",
    "ca_bundle",
    "extra_authorities",
    "ssl_context",
    "tls_error",
    "warn_unverified",
]

log = logging.getLogger("crawlfleet.fetch")

SELF_SIGNED: Final = "self-signed certificate"
EXPIRED: Final = "certificate expired"
NOT_YET_VALID: Final = "certificate not yet valid"
HOSTNAME: Final = "hostname mismatch"
UNKNOWN_CA: Final = "unknown certificate authority"
REVOKED: Final = "certificate revoked"
BAD_CERT: Final = "invalid certificate"
PROTOCOL: Final = "no TLS version or cipher in common"

# OpenSSL's X509_V_ERR_* codes (x509_vfy.h) as the names above
_OPENSSL_CODES: Final = {
    9: NOT_YET_VALID,
    10: EXPIRED,
    18: SELF_SIGNED,
    19: SELF_SIGNED,  # ... in the chain
    20: UNKNOWN_CA,  # unable to get the issuer locally
    21: UNKNOWN_CA,  # unable to verify the first certificate (an incomplete chain)
    2: UNKNOWN_CA,
    23: REVOKED,
    62: HOSTNAME,
    64: HOSTNAME,  # IP address mismatch
}
# the words of curl's (BoringSSL's) and Chromium's messages, most specific first
_MESSAGE_WORDS: Final = (
    ("self signed", SELF_SIGNED),
    ("self-signed", SELF_SIGNED),
    ("has expired", EXPIRED),
    ("expired", EXPIRED),
    ("not yet valid", NOT_YET_VALID),
    ("no alternative certificate subject name", HOSTNAME),
    ("does not match target host", HOSTNAME),
    ("hostname mismatch", HOSTNAME),
    ("subject name does not match", HOSTNAME),
    ("ERR_CERT_COMMON_NAME_INVALID", HOSTNAME),
    ("ERR_CERT_DATE_INVALID", EXPIRED),
    ("ERR_CERT_AUTHORITY_INVALID", UNKNOWN_CA),
    ("ERR_CERT_REVOKED", REVOKED),
    ("ERR_SSL_VERSION_OR_CIPHER_MISMATCH", PROTOCOL),
    ("ERR_CERT_", BAD_CERT),
    ("unable to get local issuer", UNKNOWN_CA),
    ("unable to get issuer", UNKNOWN_CA),
    ("unable to verify the first certificate", UNKNOWN_CA),
    ("certificate verify failed", BAD_CERT),
    ("revoked", REVOKED),
)


def tls_error(why: str, where: str) -> TlsError:
    """The error for a failed handshake with ``where`` (``host:port``)."""
    return TlsError(f"{why} ({where})")


def verify_failure(exc: ssl.SSLCertVerificationError) -> str:
    """The name of what OpenSSL's verification refused."""
    return _OPENSSL_CODES.get(exc.verify_code) or message_failure(exc.verify_message or str(exc))


def message_failure(message: str) -> str:
    """The name of a certificate failure, read off a TLS library's message (curl's, Chromium's
    ``net::ERR_CERT_...``); :data:`BAD_CERT` when the message names nothing known."""
    lowered = message.lower()
    for words, name in _MESSAGE_WORDS:
        if words.lower() in lowered:
            return name
    return BAD_CERT


# -- trust ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Authorities:
    """Where the authorities beyond the system's come from (files and directories of PEM)."""

    files: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.files or self.dirs)

    def pem_files(self) -> Iterator[Path]:
        """Every file of the sources (a directory's regular files, sorted)."""
        for name in self.files:
            yield Path(name)
        for directory in self.dirs:
            root = Path(directory)
            if root.is_dir():
                yield from sorted(p for p in root.iterdir() if p.is_file())


def extra_authorities(ca_file: str | None) -> Authorities:
    """The authorities trusted besides the system's: ``SSL_CERT_FILE``, ``SSL_CERT_DIR`` and
    ``ca_file``, those that exist (a missing ``ca_file`` is refused by the settings)."""
    files = [os.environ.get("SSL_CERT_FILE") or "", ca_file or ""]
    dirs = (os.environ.get("SSL_CERT_DIR") or "").split(os.pathsep)
    return Authorities(
        files=tuple(dict.fromkeys(f for f in files if f and os.path.isfile(f))),
        dirs=tuple(dict.fromkeys(d for d in dirs if d and os.path.isdir(d))),
    )


def _system_paths() -> tuple[str | None, str | None]:
    """OpenSSL's compiled-in CA file and directory (not the environment's overrides)."""
    paths = ssl.get_default_verify_paths()
    cafile = paths.openssl_cafile if os.path.isfile(paths.openssl_cafile) else None
    capath = paths.openssl_capath if os.path.isdir(paths.openssl_capath) else None
    return cafile, capath


def ssl_context(ca_file: str | None = None, *, verify: bool = True) -> ssl.SSLContext:
    """The client context of the HTTP fetcher: the system's authorities, the environment's and
    ``ca_file``, hostnames checked; or no verification at all (``verify=False``)."""
    context = ssl.create_default_context()  # the system's, and OpenSSL reads the environment
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    cafile, capath = _system_paths()
    # SSL_CERT_FILE or SSL_CERT_DIR set replaces the system's in OpenSSL: add them back; and
    # the system's own paths again in those variables (Debian images often set both) are not
    # loaded twice (every PEM file of /etc/ssl/certs one by one takes a second or more)
    system = {_real(p) for p in (cafile, capath) if p}
    if _overridden(cafile, capath):
        context.load_verify_locations(cafile=cafile, capath=capath)
    extra = extra_authorities(ca_file)
    for path in extra.files:
        if _real(path) not in system:
            context.load_verify_locations(cafile=path)
    for directory in extra.dirs:
        if _real(directory) in system:
            continue
        context.load_verify_locations(capath=directory)
        for pem in extra.pem_files():  # capath wants hashed names; plain files work too
            if str(pem.parent) == directory and _looks_pem(pem):
                context.load_verify_locations(cafile=str(pem))
    return context


def _real(path: str) -> str:
    return os.path.realpath(path)


def _overridden(cafile: str | None, capath: str | None) -> bool:
    """Whether the environment points OpenSSL's defaults away from the system's paths (then a
    default context lacks the system's authorities)."""
    for variable, own in (("SSL_CERT_FILE", cafile), ("SSL_CERT_DIR", capath)):
        value = os.environ.get(variable)
        if value and (own is None or _real(value) != _real(own)):
            return True
    return False


def _looks_pem(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return b"-----BEGIN CERTIFICATE-----" in f.read(1 << 16)
    except OSError:
        return False


def _pem_blocks(paths: Iterable[Path]) -> Iterator[bytes]:
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"-----BEGIN CERTIFICATE-----" in data:
            yield data if data.endswith(b"\n") else data + b"\n"


def ca_bundle(ca_file: str | None = None) -> str:
    """One PEM file with every authority :func:`ssl_context` trusts (for curl's ``CAINFO``),
    written once per set of sources into the temporary directory and reused."""
    cafile, capath = _system_paths()
    sources: list[Path] = []
    if cafile:
        sources.append(Path(cafile))
    elif capath:
        sources.extend(sorted(p for p in Path(capath).iterdir() if p.is_file()))
    sources.extend(extra_authorities(ca_file).pem_files())
    blocks = list(_pem_blocks(sources))
    data = b"".join(blocks)
    digest = hashlib.sha256(data).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"crawlfleet-ca-{digest}.pem"
    if not target.is_file():
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".crawlfleet-ca-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    return str(target)


# -- verification off -------------------------------------------------------------------------

_WARNED_MAX: Final = 10_000
_warned: set[str] = set()


def warn_unverified(host: str) -> None:
    """Log once per host (per process) that its certificate is not checked."""
    if host in _warned:
        return
    if len(_warned) >= _WARNED_MAX:
        _warned.clear()
    _warned.add(host)
    log.warning(
        "TLS verification is off for %s (tls_verify = false): its certificate is not checked",
        host,
    )
