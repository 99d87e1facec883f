"""serve's rules on who may talk to it: bind, Host header, tokens, same origin (pure parts)."""

from __future__ import annotations

import base64

import pytest

from crawlfleet.control.security import (
    allowed_names,
    basic_password,
    bearer,
    check_bind,
    host_allowed,
    same_origin,
    token_matches,
)
from crawlfleet.errors import UsageError

NAMES = allowed_names("127.0.0.1", ["crawl.internal"])


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        ("127.0.0.1:8686", True),
        ("localhost:8686", True),
        ("LOCALHOST:8686", True),
        ("[::1]:8686", True),
        ("localhost", True),
        ("crawl.internal:8686", True),
        ("127.0.0.1:9999", False),  # another port: another server's page
        ("evil.example:8686", False),  # DNS rebinding
        ("evil.example", False),
        ("[::1]x", False),
        ("", False),
        (None, False),
    ],
)
def test_host_allowed__loopback_and_configured_names_on_our_port_only(
    header: str | None, ok: bool
) -> None:
    assert host_allowed(header, NAMES, 8686) is ok


def test_check_bind__beyond_loopback_needs_a_token() -> None:
    check_bind("127.0.0.1", "")
    check_bind("::1", "")
    check_bind("0.0.0.0", "s3cret")
    with pytest.raises(UsageError, match=r"serve --host 0.0.0.0 needs a token"):
        check_bind("0.0.0.0", "")
    with pytest.raises(UsageError, match="needs a token"):
        check_bind("10.1.2.3", "")


def test_tokens__bearer_and_basic_compared_exactly() -> None:
    assert bearer("Bearer abc") == "abc" and bearer("Basic abc") is None and bearer(None) is None
    basic = "Basic " + base64.b64encode(b"anyone:abc").decode()
    assert basic_password(basic) == "abc"
    assert basic_password("Basic !!!") is None
    assert token_matches("abc", "abc")
    assert not token_matches("abd", "abc")
    assert not token_matches("", "")  # no token configured matches nothing
    assert not token_matches(None, "abc")


@pytest.mark.parametrize(
    ("origin", "site", "ok"),
    [
        ("http://127.0.0.1:8686", None, True),
        ("http://evil.example", None, False),
        ("null", None, False),
        (None, "same-origin", True),
        (None, "cross-site", False),
        (None, None, True),  # curl and other clients that are no browser
    ],
)
def test_same_origin(origin: str | None, site: str | None, ok: bool) -> None:
    assert same_origin(origin, site, "127.0.0.1:8686") is ok
