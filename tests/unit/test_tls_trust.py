"""The HTTP fetcher's trust when the environment names the system's own authorities again
(Debian images set SSL_CERT_FILE and SSL_CERT_DIR to them): loaded once, not file by file."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from crawlfleet.fetch import tls


def _system() -> tuple[str | None, str | None]:
    return tls._system_paths()


def test_the_systems_paths_in_the_environment_are_no_override(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cafile, capath = _system()
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    assert not tls._overridden(cafile, capath)
    if cafile:
        monkeypatch.setenv("SSL_CERT_FILE", cafile)
    if capath:
        monkeypatch.setenv("SSL_CERT_DIR", capath)
    assert not tls._overridden(cafile, capath)


def test_another_file_or_directory_is_an_override(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cafile, capath = _system()
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    assert tls._overridden(cafile, capath)
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    assert tls._overridden(cafile, capath)


def test_the_context_trusts_the_systems_authorities_either_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cafile, capath = _system()
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    plain = ssl.create_default_context().cert_store_stats()["x509_ca"]
    if cafile:
        monkeypatch.setenv("SSL_CERT_FILE", cafile)
    if capath:
        monkeypatch.setenv("SSL_CERT_DIR", capath)
    assert tls.ssl_context().cert_store_stats()["x509_ca"] >= plain
