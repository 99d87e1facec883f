from __future__ import annotations

import ada_url
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from crawlfleet.urls import (
    DEFAULT_SESSION_PARAMS,
    TOKEN_PARAMS,
    LinkCanonicalizer,
    canonicalize,
    credentials_by_origin,
    fingerprint,
    host_of,
    in_scope,
    mask_credentials,
    request_identity,
    request_url,
    split_credentials,
)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTP://Example.COM/Path", "http://example.com/Path"),
        ("https://example.com:443/", "https://example.com/"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("https://example.com:80/", "https://example.com:80/"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com/a#frag", "http://example.com/a"),
        ("http://example.com/?b=2&a=1", "http://example.com/?a=1&b=2"),
        # by key; a key's repeated values keep their order (another order is another page)
        ("http://example.com/?a=2&a=1&a=", "http://example.com/?a=2&a=1&a="),
        (
            "http://example.com/?sort=price&b=1&sort=name",
            "http://example.com/?b=1&sort=price&sort=name",
        ),
        ("http://example.com/?b&a", "http://example.com/?a&b"),
        ("http://example.com/?", "http://example.com/"),
        ("http://example.com/?&&a=1&", "http://example.com/?a=1"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/a/%2e%2E/c", "http://example.com/c"),
        ("http://example.com/%7euser/%41", "http://example.com/~user/A"),
        ("http://example.com/a%2fb%3f", "http://example.com/a%2Fb%3F"),
        ("http://example.com/caf%c3%a9", "http://example.com/caf%C3%A9"),
        ("http://example.com/café", "http://example.com/caf%C3%A9"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://example.com/[x]|^", "http://example.com/%5Bx%5D%7C%5E"),
        ("http://example.com/100%", "http://example.com/100%25"),
        ("http://example.com/?q=a+b%20c", "http://example.com/?q=a+b%20c"),
        ("http://example.com/?q=%7e&r=%2f", "http://example.com/?q=~&r=%2F"),
        ("http://example.com/?q=it's", "http://example.com/?q=it%27s"),
        ("http://example.com/?a=b=c", "http://example.com/?a=b=c"),
        ("http://Bücher.example/", "http://xn--bcher-kva.example/"),
        ("http://user:p%40ss@Example.com/", "http://user:p%40ss@example.com/"),
        ("http://[::1]:80/", "http://[::1]/"),
        ("  http://example.com/x  ", "http://example.com/x"),
        # session ids, in the query and as path parameters, any case
        ("http://example.com/?id=3&PHPSESSID=abc", "http://example.com/?id=3"),
        ("http://example.com/?jsessionid=1&sid=2", "http://example.com/?sid=2"),
        ("http://example.com/?sid=9f8e7d6c5b4a3928&x=1", "http://example.com/?x=1"),
        ("http://example.com/?SESSION=0a1b2c3d-4e5f-6a7b-8c9d&x=1", "http://example.com/?x=1"),
        ("http://example.com/?sid=abcdefghijklmnopq", "http://example.com/?sid=abcdefghijklmnopq"),
        ("http://example.com/?sid=1234567890123456", "http://example.com/?sid=1234567890123456"),
        ("http://example.com/story;sid=12", "http://example.com/story;sid=12"),
        ("http://example.com/cart;jsessionid=AB12?x=1", "http://example.com/cart?x=1"),
        ("http://example.com/a;JSESSIONID=1;v=2/b", "http://example.com/a;v=2/b"),
        ("http://example.com/a/..;jsessionid=1/b", "http://example.com/b"),
        ("http://example.com/a;v=2", "http://example.com/a;v=2"),
    ],
)
def test_canonicalize(url: str, expected: str) -> None:
    assert canonicalize(url) == expected


def test_canonicalize_session_params_are_configurable() -> None:
    url = "http://example.com/a;sid=1?sid=2&sid=ab12ab12ab12ab12ab12&token=3"
    assert canonicalize(url, session_params=frozenset()) == url
    only_token = frozenset({"token"})
    assert canonicalize(url, session_params=only_token) == "http://example.com/a;sid=1?sid=2"


def test_default_session_params_are_lowercase() -> None:
    assert {"jsessionid", "phpsessid", "sessionid", "cftoken"} <= DEFAULT_SESSION_PARAMS
    assert all(name == name.lower() for name in DEFAULT_SESSION_PARAMS | TOKEN_PARAMS)
    assert "sid" not in DEFAULT_SESSION_PARAMS  # a story's or a section's id as often: by value


def test_short_ids_named_like_sessions_are_pages_long_random_values_are_sessions() -> None:
    assert (
        request_identity("http://h.test/p?sid=1")[1] != request_identity("http://h.test/p?sid=2")[1]
    )
    token_a, token_b = "sid=3f9a0c1e7b2d4f6a8c0e", "sid=Zx81Qp02Lm93Kd47Hg55"
    assert (
        request_identity(f"http://h.test/p?{token_a}")[1]
        == request_identity(f"http://h.test/p?{token_b}")[1]
        == request_identity("http://h.test/p")[1]
    )


@pytest.mark.parametrize(
    "url",
    [
        "",
        "example.com/x",
        "//example.com/x",
        "http://",
        "http://exa mple.com/",
        "http://[::1/",
        "ftp://example.com/",
        "mailto:a@example.com",
        "javascript:void(0)",
        "file:///etc/passwd",
        "data:text/html,hi",
    ],
)
def test_canonicalize_rejects(url: str) -> None:
    with pytest.raises(ValueError):
        canonicalize(url)


def test_canonicalize_error_masks_credentials() -> None:
    with pytest.raises(ValueError) as info:
        canonicalize("ftp://user:hunter2@example.com/")
    assert "hunter2" not in str(info.value)


def test_fingerprint_is_pinned() -> None:
    # The frontier's unique key: changing it orphans every stored request. Do not update lightly.
    assert fingerprint("https://shop.test/").hex() == "78e2a25edeb1edd5b8f10df580fbfaa3"
    assert fingerprint("https://shop.test/", "post", b"a=1").hex() == (
        "b29733736147fd90da54f241e613520a"
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("https://shop.test/",), ("https://shop.test/x",)),
        (("https://shop.test/", "GET"), ("https://shop.test/", "POST")),
        (("https://shop.test/", "POST", None), ("https://shop.test/", "POST", b"")),
        (("https://shop.test/", "POST", b"a=1"), ("https://shop.test/", "POST", b"a=2")),
    ],
)
def test_fingerprint_distinguishes(a: tuple[object, ...], b: tuple[object, ...]) -> None:
    fa, fb = fingerprint(*a), fingerprint(*b)  # type: ignore[arg-type]
    assert len(fa) == len(fb) == 16
    assert fa != fb


def test_fingerprint_method_case_does_not_matter() -> None:
    assert fingerprint("https://shop.test/", "get") == fingerprint("https://shop.test/")


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://Shop.Test:8443/x", "shop.test"),
        ("http://u:p@shop.test/", "shop.test"),
        ("http://[::1]:8080/", "::1"),
        ("http://Bücher.example/", "xn--bcher-kva.example"),
        ("http://127.0.0.1:5000/", "127.0.0.1"),
    ],
)
def test_host_of(url: str, host: str) -> None:
    assert host_of(url) == host


@pytest.mark.parametrize(
    ("host", "scope", "expected"),
    [
        ("shop.test", ["shop.test"], True),
        ("www.shop.test", ["shop.test"], True),
        ("a.b.shop.test", ["other.test", "shop.test"], True),
        ("myshop.test", ["shop.test"], False),
        ("shop.test.evil", ["shop.test"], False),
        ("test", ["shop.test"], False),
        ("SHOP.test.", ["Shop.Test"], True),
        ("xn--bcher-kva.example", ["bücher.example"], True),
        ("shop.test", [], False),
        ("shop.test", [""], False),
    ],
)
def test_in_scope(host: str, scope: list[str], expected: bool) -> None:
    assert in_scope(host, scope) is expected


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("http://user:pw@proxy.test:8080/", "http://user:[secure]@proxy.test:8080/"),
        ("socks5://u:p%40ss@h:1080", "socks5://u:[secure]@h:1080"),
        ("https://token@api.test/x", "https://[secure]@api.test/x"),
        ("http://u:p@ss@h/", "http://u:[secure]@h/"),
        ("http://h/path@x?y=a@b#c@d", "http://h/path@x?y=a@b#c@d"),
        ("http://shop.test/", "http://shop.test/"),
        ("not a url @ all", "not a url @ all"),
        ("", ""),
    ],
)
def test_mask_credentials(url: str, masked: str) -> None:
    assert mask_credentials(url) == masked


BASE = "https://shop.test/list/shoes/"


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("/about", "https://shop.test/about"),
        ("item?id=2&b=1#reviews", "https://shop.test/list/shoes/item?id=2&b=1"),
        ("../boots/", "https://shop.test/list/boots/"),
        ("?page=2", "https://shop.test/list/shoes/?page=2"),
        ("#top", "https://shop.test/list/shoes/"),
        ("", "https://shop.test/list/shoes/"),
        ("//cdn.test/a.png", "https://cdn.test/a.png"),
        ("/\\other.test/x", "https://other.test/x"),
        ("HTTP://Other.Test:80/X", "http://other.test/X"),
        (" /about ", "https://shop.test/about"),
        ("/\t/other.test/x", "https://other.test/x"),
        ("/a\tb\n", "https://shop.test/ab"),
    ],
)
def test_resolve(href: str, expected: str) -> None:
    canon = LinkCanonicalizer()
    for _ in range(2):  # the second call answers from the cache
        result = canon.resolve(href, BASE)
        assert result is not None
        url, fp, host = result
        assert (url, fp, host) == (expected, fingerprint(canonicalize(expected)), host_of(expected))


def test_resolve__session_ids_kept_in_the_url__left_out_of_the_fingerprint() -> None:
    canon = LinkCanonicalizer()
    for href, asked, key in [
        (
            "http://other.test/;jsessionid=9",
            "http://other.test/;jsessionid=9",
            "http://other.test/",
        ),
        ("/a?sessionid=7&b=1", "https://shop.test/a?sessionid=7&b=1", "https://shop.test/a?b=1"),
    ]:
        assert canon.resolve(href, BASE) == (asked, fingerprint(key), host_of(key))


@pytest.mark.parametrize(
    "url",
    [
        "http://shop.test/get?url=/get&status_code=307",
        "http://shop.test/list?sort=price&sort=name",
        "http://shop.test/a%7eb/%2F?q=%7e&r=a+b&s=%2F&t=it%27s&&z",
        "http://shop.test/p|x?a=[1]&b",
        "http://shop.test/?",
    ],
)
def test_request_url__the_url_as_given(url: str) -> None:
    assert request_url(url) == url
    assert request_identity(url)[0] == url
    assert LinkCanonicalizer().resolve(url, BASE) == request_identity(url)


def test_request_url__as_a_browser_sends_it() -> None:
    given = "HTTP://u:pw@Shop.Test:80/a/./b/../c d?q=é#frag"
    assert request_url(given) == "http://shop.test/a/c%20d?q=%C3%A9"


def test_request_identity__fetch_what_was_asked__dedup_without_session_or_credentials() -> None:
    url, fp, host = request_identity("http://u:pw@Shop.test/p?sessionid=1&a=2")
    assert url == "http://shop.test/p?sessionid=1&a=2"
    assert fp == fingerprint("http://shop.test/p?a=2")
    assert host == "shop.test"
    assert request_identity("http://shop.test/p?a=2")[1] == fp
    assert request_url("http://u:pw@shop.test/x;sid=3") == "http://shop.test/x;sid=3"


@pytest.mark.parametrize(
    ("url", "stripped", "credentials"),
    [
        ("http://user:p%40ss@host.test:81/a", "http://host.test:81/a", ("user", "p@ss")),
        ("https://token@api.test/", "https://api.test/", ("token", "")),
        ("http://host.test/a@b", "http://host.test/a@b", None),
        ("not a url", "not a url", None),
    ],
)
def test_split_credentials(url: str, stripped: str, credentials: tuple[str, str] | None) -> None:
    assert split_credentials(url) == (stripped, credentials)


def test_credentials_by_origin() -> None:
    urls = ["http://a:1@h.test/x", "http://h.test/y", "https://b:2@h.test:8443/", "bad://c:3@"]
    assert credentials_by_origin(urls) == {
        "http://h.test": ("a", "1"),
        "https://h.test:8443": ("b", "2"),
    }


@pytest.mark.parametrize(
    "href",
    [
        "mailto:help@shop.test",
        "javascript:void(0)",
        " javascript:alert(1)",
        "tel:+4912345",
        "data:text/html,hi",
        "ftp://shop.test/file",
        "http://exa mple.com/",
        "http://[::1/",
    ],
)
def test_resolve_rejects(href: str) -> None:
    canon = LinkCanonicalizer()
    assert canon.resolve(href, BASE) is None
    assert canon.resolve(href, BASE) is None


def test_resolve_root_relative_depends_on_base_origin() -> None:
    canon = LinkCanonicalizer()
    bases = ["https://a.test/x", "https://b.test/y", "http://a.test/", "https://u:p@a.test:81/z"]
    got = [canon.resolve("/p?b=1&a=2", base) for base in bases]
    assert [r[0] if r else None for r in got] == [
        "https://a.test/p?b=1&a=2",
        "https://b.test/p?b=1&a=2",
        "http://a.test/p?b=1&a=2",
        "https://a.test:81/p?b=1&a=2",  # credentials are never part of a request's URL
    ]


def test_resolve_cache_is_bounded() -> None:
    canon = LinkCanonicalizer(max_cache=3)
    for i in range(10):
        assert canon.resolve(f"/p/{i}", BASE) is not None
        assert len(canon) <= 3
    assert canon.resolve("/p/1", BASE) == canon.resolve("https://shop.test/p/1", BASE)


def test_resolve_uses_session_params() -> None:
    canon = LinkCanonicalizer(session_params=frozenset({"token"}))
    result = canon.resolve("/a?token=1&sid=2", BASE)
    assert result is not None
    assert result[0] == "https://shop.test/a?token=1&sid=2"
    assert result[1] == fingerprint("https://shop.test/a?sid=2")


# Property tests: URLs assembled from awkward parts.
_SEGMENT_TOKENS = st.sampled_from(
    [
        *"aZ09-._~!$&'()*+,;=:@%|[]^`{}\"<> \\é€",
        "%2e",
        "%2E",
        "%7e",
        "%2f",
        "%41",
        "%zz",
        "..",
        ".",
        ";jsessionid=1",
        ";v=2",
        "\t",
    ]
)
_QUERY_TOKENS = st.sampled_from(
    [*"aZ09-._~!$'()*+,;:@/?%|[]^`{}\"<> \\é", "=", "&", "%26", "%3d", "%7E", "sid=1"]
)


def _joined(tokens: st.SearchStrategy[str], max_size: int) -> st.SearchStrategy[str]:
    return st.lists(tokens, max_size=max_size).map("".join)


_HOSTS = st.sampled_from(
    ["shop.test", "Shop.TEST", "bücher.example", "127.0.0.1", "[::1]", "a-b.c.test", "0x7f.1"]
)


@st.composite
def urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "hTtPs"]))
    userinfo = draw(st.sampled_from(["", "user@", "user:pw@", "u%41:p@"]))
    port = draw(st.sampled_from(["", ":80", ":443", ":8080"]))
    segments = draw(st.lists(_joined(_SEGMENT_TOKENS, 4), max_size=5))
    query = draw(st.none() | _joined(_QUERY_TOKENS, 12))
    fragment = draw(st.none() | _joined(_QUERY_TOKENS, 4))
    url = f"{scheme}://{userinfo}{draw(_HOSTS)}{port}/" + "/".join(segments)
    if query is not None:
        url += "?" + query
    if fragment is not None:
        url += "#" + fragment
    return url


@given(urls())
@example("http://shop.test/a/..;jsessionid=1/b")
@example("http://shop.test/?q=%27&r='")
def test_canonicalize_is_idempotent(url: str) -> None:
    once = canonicalize(url)
    assert canonicalize(once) == once
    assert once.isascii()
    assert "#" not in once


@given(st.text())
def test_canonicalize_is_idempotent_on_any_path(tail: str) -> None:
    try:
        once = canonicalize("http://shop.test/" + tail)
    except ValueError:
        return
    assert canonicalize(once) == once


@given(urls(), st.sampled_from([BASE, "http://other.test:8080/a/b?c=d", "https://u:p@x.test/"]))
def test_resolve_agrees_with_canonicalize_for_absolute_links(url: str, base: str) -> None:
    canon = LinkCanonicalizer()
    expected = request_identity(url)
    for _ in range(2):
        assert canon.resolve(url, base) == expected


@given(
    st.lists(_joined(_SEGMENT_TOKENS, 4), min_size=1, max_size=4),
    st.sampled_from(["", "/", "./", "../", "?"]),
    st.sampled_from([BASE, "http://other.test:8080/a/b?c=d", "https://u:p@x.test/"]),
)
def test_resolve_agrees_with_canonicalize_for_relative_links(
    segments: list[str], lead: str, base: str
) -> None:
    href = lead + "/".join(segments)
    try:
        expected = request_url(ada_url.join_url(base, href))
    except ValueError:
        expected = None
    canon = LinkCanonicalizer()
    for _ in range(2):
        result = canon.resolve(href, base)
        assert (result[0] if result else None) == expected


_PLAIN_TOKENS = st.sampled_from([*"aZ09-._~!$&'()*+,=:@/", ".", "..", ";", "%41", "?", "#", "\\"])
_ORIGINS = [
    "https://shop.test",
    "HTTP://Shop.TEST:80",
    "http://other.test:8080",
    "https://u:p@x.test",
]


@given(_joined(_PLAIN_TOKENS, 12), st.sampled_from(_ORIGINS), st.booleans())
def test_resolve_of_plain_paths_agrees_with_canonicalize(
    path: str, origin: str, absolute: bool
) -> None:
    # links of the page's own origin with a plain path are taken as written: check they are
    # exactly what a full parse gives, on canonical and non-canonical bases alike
    base = origin + "/list/page"
    href = (origin if absolute else "") + "/" + path
    try:
        expected = request_url(ada_url.join_url(base, href))  # as asked: no credentials
    except ValueError:
        expected = None
    canon = LinkCanonicalizer()
    for _ in range(2):
        result = canon.resolve(href, base)
        assert (result[0] if result else None) == expected
        if result is not None:
            assert expected is not None
            assert result == (expected, fingerprint(canonicalize(expected)), host_of(expected))
