"""Real certificates made in the test: a throwaway certificate authority and server
certificates signed by it for ``localhost`` / ``127.0.0.1`` (``FetchSettings(ca_file=...)`` or
``SSL_CERT_FILE`` trusts the CA), and the broken kinds users meet: self-signed, expired, and
issued for another host."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

LOCAL_NAMES = ("localhost", "127.0.0.1")
PEM = serialization.Encoding.PEM


@dataclass(frozen=True)
class LocalCA:
    ca_file: Path
    cert_file: Path
    key_file: Path

    def server_context(self, alpn: Sequence[str] | None = None) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        if alpn:
            context.set_alpn_protocols(list(alpn))
        return context


@dataclass(frozen=True)
class _Authority:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _authority(common: str = "crawlfleet test CA") -> _Authority:
    now = _now()
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return _Authority(cert, key)


def _san(names: Sequence[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def _leaf(
    issuer: _Authority | None,
    names: Sequence[str],
    *,
    expired: bool = False,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A server certificate for ``names``, signed by ``issuer`` (None: by itself)."""
    now = _now()
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1)
    if expired:
        start, end = now - datetime.timedelta(days=30), now - datetime.timedelta(days=1)
    signer_key = issuer.key if issuer is not None else key
    issuer_name = issuer.cert.subject if issuer is not None else _name(names[0])
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(_san(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.ExtendedKeyUsageOID.SERVER_AUTH]), False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()), False
        )
    return builder.sign(signer_key, hashes.SHA256()), key


def _write(
    directory: Path, stem: str, ca: x509.Certificate, leaf: x509.Certificate, key: object
) -> LocalCA:
    directory.mkdir(parents=True, exist_ok=True)
    out = LocalCA(
        directory / f"{stem}ca.pem", directory / f"{stem}cert.pem", directory / f"{stem}key.pem"
    )
    out.ca_file.write_bytes(ca.public_bytes(PEM))
    out.cert_file.write_bytes(leaf.public_bytes(PEM))
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    out.key_file.write_bytes(
        key.private_bytes(PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return out


def make_ca(directory: Path) -> LocalCA:
    """Write a CA and a server certificate signed by it (``localhost``, ``127.0.0.1``)."""
    authority = _authority()
    leaf, key = _leaf(authority, LOCAL_NAMES)
    return _write(directory, "", authority.cert, leaf, key)


def make_broken(directory: Path, kind: str) -> LocalCA:
    """A server certificate of a broken ``kind``: ``self-signed`` (for the local names, signed
    by itself), ``expired`` (by a CA, ended yesterday) or ``other-host`` (by a CA, for
    ``shop.example`` only). Trusting ``ca_file`` does not mend any of them."""
    authority = _authority()
    if kind == "self-signed":
        leaf, key = _leaf(None, LOCAL_NAMES)
        return _write(directory, "self-", leaf, leaf, key)
    if kind == "expired":
        leaf, key = _leaf(authority, LOCAL_NAMES, expired=True)
        return _write(directory, "expired-", authority.cert, leaf, key)
    if kind == "other-host":
        leaf, key = _leaf(authority, ("shop.example",))
        return _write(directory, "other-", authority.cert, leaf, key)
    raise ValueError(kind)
