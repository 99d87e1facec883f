"""Canonical URLs, fingerprints and scope: pure functions, no I/O.

The canonical form is the frontier's identity for a page: two URLs that a server would answer the
same way should canonicalise to the same string. What changes, and why:

* scheme and host lower-cased, IDNA hosts in punycode, default ports dropped, dot segments
  removed, empty path ``/`` (all done by ``ada_url``, a WHATWG URL parser, so browsers agree);
* fragment dropped (never sent to the server);
* percent-encoding normalised: hex upper-case, unreserved characters decoded, anything RFC 3986
  does not allow raw is escaped, so ``%7euser`` and ``~user`` are one URL;
* query parameters ordered by key (a key's repeated values keep their order: ``?sort=price&
  sort=name`` is another page than ``?sort=name&sort=price``), blank values kept;
* session ids dropped, in the query and as path parameters (``/cart;jsessionid=AB12``): the
  names only sessions use (``jsessionid``, ``phpsessid``... :data:`DEFAULT_SESSION_PARAMS`, plus
  what a spider adds), and the names that may be a session or an id (``sid``, ``session``,
  ``sess``: :data:`TOKEN_PARAMS`) only when the value looks like a token (16 or more letters and
  digits, both in it, or ``-``/``_``): ``?sid=2`` is a story, ``?sid=9f8e7d6c5b4a39281706`` a
  session;
* path case kept: servers may treat ``/A`` and ``/a`` as different pages;
* userinfo kept by :func:`canonicalize` (use :func:`mask_credentials` before showing a URL).

The canonical form is for the fingerprint only. A request is stored and fetched as
:func:`request_url` gives it: the URL as given, serialised as a browser would send it (WHATWG:
lower-case scheme and host, default port and dot segments dropped, characters that may not be
raw escaped) without its fragment and userinfo; its query and its escapes are never rewritten
(credentials are split off at intake, :func:`split_credentials`, and never stored).
:func:`request_identity` gives both: the URL to fetch, and the fingerprint of its canonical form.

:class:`LinkCanonicalizer` is the crawler's hot path: it resolves links found on a page and
caches the results, since most links (menus, footers) repeat on every page of a site.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container, Iterable
from functools import lru_cache
from typing import Final
from urllib.parse import unquote, urljoin

import ada_url

__all__ = [
    "DEFAULT_SESSION_PARAMS",
    "TOKEN_PARAMS",
    "LinkCanonicalizer",
    "canonicalize",
    "credentials_by_origin",
    "fingerprint",
    "host_of",
    "in_scope",
    "join",
    "mask_credentials",
    "origin_of",
    "request_identity",
    "request_url",
    "split_credentials",
]

#: parameter names only sessions use: dropped from the canonical form whatever their value
DEFAULT_SESSION_PARAMS: Final[frozenset[str]] = frozenset(
    {
        "jsessionid",
        "phpsessid",
        "sessid",
        "sessionid",
        "session_id",
        "aspsessionid",
        "cfid",
        "cftoken",
        "oscsid",
        "zenid",
        "xtcsid",
    }
)

#: names that are a session's or an id's: dropped only with a value that looks like a token
TOKEN_PARAMS: Final[frozenset[str]] = frozenset({"sid", "session", "sess"})
_TOKEN: Final = re.compile(r"[A-Za-z0-9_\-]{16,}")

_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

# One pattern per component: a percent escape (possibly lower-case or of an unreserved character)
# or one character that may not appear raw there. Everything else is left as it is.
# Path: unreserved, sub-delims, ":@/" (RFC 3986 pchar plus "/").
_PATH_FIX: Final = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/]")
# Query key or value: like the path plus "?", but "&" stays escaped (it separates pairs) and "'"
# is escaped because WHATWG parsers escape it in special-scheme queries; emitting it raw would
# make a second pass change the URL.
_QUERY_FIX: Final = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$()*+,;=:@/?]")


def _escape_table() -> dict[str, str]:
    """Every spelling of ``%XX`` mapped to its normal form: the character if unreserved, else
    upper-case hex."""
    table: dict[str, str] = {}
    for byte in range(256):
        char = chr(byte)
        normal = char if char in _UNRESERVED else f"%{byte:02X}"
        hex_ = f"{byte:02x}"
        for h in {hex_[0], hex_[0].upper()}:
            for low in {hex_[1], hex_[1].upper()}:
                table[f"%{h}{low}"] = normal
    return table


_ESCAPES: Final = _escape_table()


def _fix_match(match: re.Match[str]) -> str:
    text = match.group()
    normal = _ESCAPES.get(text)
    if normal is not None:
        return normal
    # A character not allowed raw (or a "%" that starts no escape): escape its UTF-8 bytes.
    return "".join(f"%{b:02X}" for b in text.encode("utf-8", "surrogatepass"))


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 dot-segment removal, WHATWG flavour (a trailing ``..`` leaves a trailing slash)."""
    segments = path.split("/")[1:]
    out: list[str] = []
    last = len(segments) - 1
    for i, seg in enumerate(segments):
        if seg in (".", ".."):
            if seg == ".." and out:
                out.pop()
            if i == last:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)


def is_session_param(name: str, value: str, session_params: frozenset[str]) -> bool:
    """Whether ``name=value`` is a session id (see the module docstring); ``session_params``:
    the names dropped whatever the value (empty: no parameter is a session id)."""
    if not session_params:
        return False
    name = name.lower()
    if name in session_params:
        return True
    if name not in TOKEN_PARAMS or _TOKEN.fullmatch(value) is None:
        return False
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _strip_path_params(path: str, session_params: frozenset[str]) -> str:
    """Drop ``;name=value`` path parameters that are session ids."""
    segments = path.split("/")
    changed = False
    for i, seg in enumerate(segments):
        if ";" not in seg:
            continue
        head, *params = seg.split(";")
        kept = [p for p in params if not is_session_param(*_pair(p), session_params)]
        if len(kept) != len(params):
            segments[i] = ";".join([head, *kept])
            changed = True
    if not changed:
        return path
    stripped = "/".join(segments)
    # "/a/..;jsessionid=1/b" becomes "/a/../b": resolve it, as a second parse would.
    if any(seg in (".", "..") for seg in segments):
        stripped = _remove_dot_segments(stripped)
    return stripped


def _normalize_path(path: str, session_params: frozenset[str]) -> str:
    path = _PATH_FIX.sub(_fix_match, path)
    if session_params and ";" in path:
        path = _strip_path_params(path, session_params)
    return path


def _pair(param: str) -> tuple[str, str]:
    name, _, value = param.partition("=")
    return name, value


def _normalize_query(query: str, session_params: frozenset[str]) -> str:
    """Normalise each pair, drop session ids and empty pieces, order by key (a stable sort: a
    key's values keep their order, which is the page's: ``?sort=price&sort=name``)."""
    pairs: list[tuple[str, str]] = []
    for piece in query.split("&"):
        if not piece:
            continue
        key, eq, value = _QUERY_FIX.sub(_fix_match, piece).partition("=")
        if session_params and is_session_param(key, value, session_params):
            continue
        # (key, "=value") keeps "a" and "a=" distinct
        pairs.append((key, eq + value))
    pairs.sort(key=_first)
    return "&".join(key + rest for key, rest in pairs)


def _first(pair: tuple[str, str]) -> str:
    return pair[0]


def _host_of_authority(authority: str) -> str:
    """The host of a serialised ``[userinfo@]host[:port]``, IPv6 without brackets."""
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        return hostport[1 : hostport.find("]")]
    return hostport.partition(":")[0]


def _finish(href: str, session_params: frozenset[str], *, userinfo: bool = True) -> tuple[str, str]:
    """Canonicalise an ada-serialised href; returns ``(canonical_url, host)`` (with
    ``userinfo=False``, the URL without its ``user:password@``).

    Raises ``ValueError`` when the scheme is not http or https.
    """
    if href.startswith("http://"):
        auth_start = 7
    elif href.startswith("https://"):
        auth_start = 8
    else:
        raise ValueError(f"not an http(s) URL: {mask_credentials(href)!r}")
    # A WHATWG serialisation of a special URL always has a path starting with "/", and "?"/"#"
    # are escaped wherever they are not delimiters, so plain string splits are exact here.
    auth_end = href.find("/", auth_start)
    if auth_end < 0:  # pragma: no cover - ada always serialises a path for http(s)
        auth_end = len(href)
        href += "/"
    rest, _, _ = href[auth_end:].partition("#")
    path, qmark, query = rest.partition("?")
    path = _normalize_path(path, session_params)
    if qmark:
        query = _normalize_query(query, session_params)
    authority = href[auth_start:auth_end]
    if not userinfo and "@" in authority:
        authority = authority.rpartition("@")[2]
    canonical = href[:auth_start] + authority + path + ("?" + query if query else "")
    return canonical, _host_of_authority(authority)


def _asked(href: str) -> tuple[str, str]:
    """An ada-serialised href as a request asks for it: ``(url, host)``, the URL without its
    fragment and userinfo and otherwise as it is. Raises ``ValueError`` when the scheme is not
    http or https."""
    if href.startswith("http://"):
        auth_start = 7
    elif href.startswith("https://"):
        auth_start = 8
    else:
        raise ValueError(f"not an http(s) URL: {mask_credentials(href)!r}")
    auth_end = href.find("/", auth_start)
    if auth_end < 0:  # pragma: no cover - ada always serialises a path for http(s)
        auth_end = len(href)
        href += "/"
    authority = href[auth_start:auth_end]
    url = href.partition("#")[0]
    if "@" in authority:
        authority = authority.rpartition("@")[2]
        url = href[:auth_start] + authority + url[auth_end:]
    return url, _host_of_authority(authority)


def _parse(url: str) -> str:
    try:
        return str(ada_url.normalize_url(url))
    except ValueError:
        raise ValueError(f"invalid URL: {mask_credentials(url)!r}") from None


def canonicalize(url: str, *, session_params: frozenset[str] = DEFAULT_SESSION_PARAMS) -> str:
    """The canonical form of an absolute http(s) URL (see the module docstring for the rules).

    Idempotent. Raises ``ValueError`` for unparseable URLs and schemes other than http/https.
    """
    return _finish(_parse(url), session_params)[0]


def request_url(url: str) -> str:
    """The URL a request is stored and fetched as: ``url`` as a browser sends it (WHATWG
    serialisation), without fragment and userinfo; query order, escapes and session ids as
    given. Raises ``ValueError`` like :func:`canonicalize`."""
    return _asked(_parse(url))[0]


def request_identity(
    url: str,
    method: str = "GET",
    body: bytes | None = None,
    *,
    session_params: frozenset[str] = DEFAULT_SESSION_PARAMS,
) -> tuple[str, bytes, str]:
    """``(request_url, fingerprint, host)`` of a request: the URL to store and fetch, and its
    dedup key, the fingerprint of its canonical form (without userinfo). Raises ``ValueError``
    for unparseable URLs and schemes other than http/https."""
    href = _parse(url)
    asked, host = _asked(href)
    key = _finish(href, session_params, userinfo=False)[0]
    return asked, fingerprint(key, method, body), host


def join(base: str, href: str) -> str:
    """``href`` made absolute against ``base`` as a browser does (the WHATWG URL parser: the
    same joiner as a page's links, so ``\\x``, ``///host`` and ``http:\\\\host`` resolve as
    browsers resolve them). Where the parser refuses the pair, ``urllib``'s join (which then
    fails to canonicalise, so the request is dropped like any unparseable link)."""
    if not base:
        return href
    try:
        return str(ada_url.join_url(base, href))
    except ValueError:
        try:
            return urljoin(base, href)
        except ValueError:
            return href


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without its userinfo, and the ``(user, password)`` it held (percent-decoded;
    None when it held none). Never raises: a string that is no URL comes back as it is."""
    if "@" not in url:
        return url, None
    match = _USERINFO.match(url)
    if match is None:
        return url, None
    user, _, password = match.group(2).partition(":")
    return match.group(1) + url[match.end() :], (unquote(user), unquote(password))


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of an absolute URL as :func:`request_url` gives it."""
    start = url.find("://")
    end = url.find("/", start + 3) if start >= 0 else -1
    return url if end < 0 else url[:end]


def credentials_by_origin(urls: Iterable[str]) -> dict[str, tuple[str, str]]:
    """The ``(user, password)`` that URLs such as a spider's ``start_urls`` carry, by origin
    (``scheme://host[:port]``): where the fetch sends them (HTTP Basic), and nowhere else.
    URLs that do not parse are left to whoever checks them."""
    found: dict[str, tuple[str, str]] = {}
    for url in urls:
        stripped, credentials = split_credentials(url)
        if credentials is None:
            continue
        try:
            found.setdefault(origin_of(request_url(stripped)), credentials)
        except ValueError:
            continue
    return found


def fingerprint(canonical_url: str, method: str = "GET", body: bytes | None = None) -> bytes:
    """The frontier's unique key: 16-byte BLAKE2b of method, canonical URL and body (if any).

    Deterministic across processes and machines. Pass a URL that is already canonical.
    ``body=None`` and ``body=b""`` give different fingerprints.
    """
    if method == "GET" and body is None:  # most requests: the same bytes, fewer steps
        return hashlib.blake2b(b"GET " + canonical_url.encode("utf-8"), digest_size=16).digest()
    data = method.upper().encode("ascii") + b" " + canonical_url.encode("utf-8")
    if body is not None:
        data += b"\n" + body  # "\n" cannot occur in a parsed URL, so this is unambiguous
    return hashlib.blake2b(data, digest_size=16).digest()


def host_of(url: str) -> str:
    """The lower-case host of ``url`` (punycode, no port, IPv6 without brackets).

    Raises ``ValueError`` for unparseable URLs and schemes other than http/https.
    """
    return _finish(_parse(url), frozenset())[1]


@lru_cache(maxsize=4096)
def _normal_host(host: str) -> str:
    host = host.strip().strip(".").lower()
    if "\x00" in host:  # the C IDNA code would stop at it
        return ""
    if host and not host.isascii():
        ascii_host: bytes = ada_url.idna_to_ascii(host)  # empty when the name is not valid IDNA
        host = ascii_host.decode("ascii").lower()
    return host


def in_scope(host: str, scope_hosts: Iterable[str]) -> bool:
    """Whether ``host`` is one of ``scope_hosts`` or a subdomain of one.

    Case, a trailing dot and Unicode vs punycode spellings do not matter. ``"shop.example"``
    covers ``"www.shop.example"`` but not ``"myshop.example"``.
    """
    host = _normal_host(host)
    for scope in scope_hosts:
        scope = _normal_host(scope)
        if scope and (host == scope or host.endswith("." + scope)):
            return True
    return False


_USERINFO: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#]*)@")


def mask_credentials(url: str) -> str:
    """``url`` with its password (or lone username) replaced by ``[secure]``, httpx style.

    ``http://user:pw@host/`` → ``http://user:[secure]@host/``; ``https://token@host/`` →
    ``https://[secure]@host/``. URLs without userinfo come back unchanged. Never raises, so it is
    safe in ``__repr__`` and log lines, whatever the string is.
    """
    if "@" not in url:
        return url
    match = _USERINFO.match(url)
    if match is None:
        return url
    user, colon, _ = match.group(2).partition(":")
    masked = f"{user}:[secure]" if colon else "[secure]"
    return f"{match.group(1)}{masked}@{url[match.end() :]}"


_MISS: Final = object()
# After a leading "/", these make a link protocol-relative (a backslash counts as a slash), or
# may: parsers drop tabs and newlines anywhere, so "/<tab>/host" means "//host".
_NOT_ROOT_RELATIVE: Final = ("/", "\\", "\t", "\n", "\r")
_Result = tuple[str, bytes, str]
# A path that canonicalises to itself: characters WHATWG parsers and _PATH_FIX leave alone, no
# ";" (path parameters may be session ids), no "%", no "?" or "#", no "\\".
_PLAIN_PATH: Final = re.compile(r"/[A-Za-z0-9\-._~!$&'()*+,=:@/]*")


def _is_plain_path(url: str, start: int) -> bool:
    """Whether ``url[start:]`` is a path that canonicalises to itself (no dot segments)."""
    if _PLAIN_PATH.fullmatch(url, start) is None:
        return False
    return "/." not in url[start:] or not any(seg in (".", "..") for seg in url[start:].split("/"))


#: most origins a LinkCanonicalizer remembers the canonical form of (a broad crawl meets many)
_ORIGINS_MAX = 10_000


def _plain_origin(prefix: str) -> tuple[str | None, str]:
    """``(prefix, host)`` if the origin ``prefix`` (``scheme://host[:port]``) is canonical as
    written, else ``(None, "")``."""
    try:
        # as requests are asked: without the base's credentials (a base with them is never plain)
        asked, host = _asked(_parse(prefix + "/"))
    except ValueError:
        return None, ""
    # as asked, and so canonical: an origin's forms agree
    return (prefix, host) if asked == prefix + "/" else (None, "")


class LinkCanonicalizer:
    """Resolve links found on pages to ``(canonical_url, fingerprint, host)``, with a cache.

    One instance per worker (not thread-safe; asyncio is fine). Results are cached by the
    absolute URL when the link is absolute (``http://…``) or root-relative (``/x``), so a
    site's menu links are computed once per worker, and by ``(base, href)`` otherwise. The cache
    holds at most ``max_cache`` links and forgets the least recently used first
    (:class:`crawlfleet.cache.BoundedMap`).

    A link of the page's own origin whose path is plain (letters, digits and the characters
    that need no escape, no dot segment, no query, fragment or path parameter) is canonical as
    written: it is taken as it is, without a parse (most new links of a broad crawl).
    """

    __slots__ = ("_base", "_cache", "_host", "_origins", "_plain", "_prefix", "_session_params")

    def __init__(
        self,
        session_params: frozenset[str] = DEFAULT_SESSION_PARAMS,
        max_cache: int = 200_000,
    ) -> None:
        from crawlfleet.cache import BoundedMap

        self._session_params = session_params
        self._cache: BoundedMap[object, _Result | None] = BoundedMap(max_cache)
        self._base = ""
        self._prefix: str | None = None
        self._plain: str | None = None  # the base's origin, when it is canonical
        self._host = ""  # and its host
        # per origin of a base: (the origin if canonical, its host): every page of a site has a
        # base of its own but one origin, parsed once
        self._origins: dict[str, tuple[str | None, str]] = {}

    def resolve(self, href: str, base: str) -> _Result | None:
        """The link ``href`` on the page at ``base`` (an absolute, canonical URL) as a request:
        ``(request_url, fingerprint, host)``.

        Returns None for links that are not http(s) (``mailto:``, ``javascript:``, ...) and for
        links that do not parse. Agrees with :func:`request_identity` on the joined URL.
        """
        return self.resolve_key(self.key(href, base), href, base)

    def key(self, href: str, base: str) -> object:
        """A cheap identity of the link ``href`` on ``base``: equal keys resolve equally.

        Callers may keep their own sets of keys (e.g. links already handled) to skip
        :meth:`resolve` altogether on the links every page of a site repeats.
        """
        if href.startswith(("http://", "https://")):
            return href
        if href[:1] == "/" and href[1:2] not in _NOT_ROOT_RELATIVE:
            # "/x" keeps the base's scheme, userinfo, host and port: prefix + href *is* the link.
            prefix = self._prefix if base == self._base else self._set_base(base)
            return (base, href) if prefix is None else prefix + href
        return (base, href)

    def unknown(self, hrefs: list[str], base: str, known: Container[object]) -> list[str]:
        """The ``hrefs`` of a page at ``base`` whose :meth:`key` is not in ``known``, in order:
        :meth:`key` for a whole page's links in one loop (the links every page repeats)."""
        prefix = self._prefix if base == self._base else self._set_base(base)
        # a BoundedSet's recent keys answer most of a page's links (its menus) without a call
        fresh: Container[object] | None = getattr(known, "recent", None)
        recent: Container[object] = () if fresh is None else fresh
        out = []
        for href in hrefs:
            if href.startswith(("http://", "https://")):
                key: object = href
            elif prefix is not None and href[:1] == "/" and href[1:2] not in _NOT_ROOT_RELATIVE:
                key = prefix + href
            else:
                key = (base, href)
            if key in recent:
                continue
            if key not in known:
                out.append(href)
            elif fresh is not None:  # an old key moved up: the generations may have turned
                recent = getattr(known, "recent", recent)
        return out

    def resolve_key(self, key: object, href: str, base: str) -> _Result | None:
        """:meth:`resolve` for a ``key`` already computed by :meth:`key`."""
        if isinstance(key, str):
            if base != self._base:
                self._set_base(base)
            plain = self._plain
            if plain is not None and key.startswith(plain) and _is_plain_path(key, len(plain)):
                # canonical as written (most new links of a crawl): nothing to look up or keep
                return key, fingerprint(key), self._host
        cache = self._cache
        hit = cache.get(key, _MISS)
        if hit is not _MISS:
            return hit  # type: ignore[return-value]
        result = self._compute(key if isinstance(key, str) else None, href, base)
        cache.put(key, result)
        return result

    def __len__(self) -> int:
        """How many links are cached (at most ``max_cache``)."""
        return len(self._cache)

    def resize(self, max_cache: int) -> None:
        """Cache at most ``max_cache`` links from now on."""
        self._cache.resize(max_cache)

    def _set_base(self, base: str) -> str | None:
        self._base = base
        start = base.find("://")
        end = base.find("/", start + 3) if start > 0 else -1
        prefix = self._prefix = base[:end] if end > 0 else None
        self._plain = None
        if prefix is not None:
            known = self._origins.get(prefix)
            if known is None:
                if len(self._origins) >= _ORIGINS_MAX:
                    self._origins.clear()
                known = self._origins[prefix] = _plain_origin(prefix)
            self._plain, self._host = known
        return prefix

    def _compute(self, absolute: str | None, href: str, base: str) -> _Result | None:
        try:
            if absolute is not None:
                href = ada_url.normalize_url(absolute)
            else:
                href = ada_url.join_url(base, href)
            asked, host = _asked(href)
            key = _finish(href, self._session_params, userinfo=False)[0]
        except ValueError:
            return None
        return asked, fingerprint(key), host
