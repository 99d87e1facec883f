"""The signature of a delivered body: HMAC-SHA256 with the destination's secret, sent as
``X-Crawlfleet-Signature: sha256=<hex>`` (GitHub's form). A receiver recomputes it over the
raw body it read and compares in constant time (:func:`verify`)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

__all__ = ["SIGNATURE_HEADER", "sign", "verify"]

SIGNATURE_HEADER: Final = "X-Crawlfleet-Signature"


def sign(secret: str, body: bytes) -> str:
    """The header value for ``body`` signed with ``secret``."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is the signature of ``body`` with ``secret``."""
    return header is not None and hmac.compare_digest(sign(secret, body), header.strip())
