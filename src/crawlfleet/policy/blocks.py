"""Block detection: is a response the site's data, or the site (or its bot wall) saying no?

:func:`detect_block` is pure and runs on every response, so its common path is a few µs. It
looks in tiers, because false positives are cheap (a retry on another route) and misses are
costly (a captcha parsed as an empty page, silently):

1. **status**: 429 always; 403 and 503 with an HTML body (an empty or JSON 503 is maintenance or
   an API's answer, left to the status rules of :mod:`crawlfleet.policy.classify`).
2. **vendor** markers, on a page of any size: Cloudflare's challenge (``_cf_chl_opt``,
   ``cf-chl-``, ``/cdn-cgi/challenge-platform/h/``, ``cf-error-code``, "Just a moment..."),
   DataDome (``captcha-delivery.com``), PerimeterX (``px-captcha``), Akamai ("Access Denied" with
   a "Reference #18.…" id), Incapsula ("Incapsula incident ID"), Sucuri, Distil ("Pardon Our
   Interruption"). These exist only on challenge and denial pages.
3. **small-page** signs, on pages with little visible text (< :data:`SMALL_TEXT` characters):
   vendor sensor scripts that protected sites also load on normal pages (``_pxAppId``,
   ``_Incapsula_Resource``, Kasada's ``KPSDK``, DataDome's tag, Cloudflare's
   ``/cdn-cgi/challenge-platform/``), generic markers ("verify you are human", "access denied",
   "unusual traffic", reCAPTCHA / hCaptcha / Turnstile classes and script URLs), and structure
   (no visible text at all; scripts but almost no text and no link).

A page with rich navigation (:data:`LINK_RICH` links in its first 64 KiB) is a real page and is
not searched for markers: no challenge or denial page carries a menu, and real pages that embed
a captcha in a login form, comment box or footer must not become blocks. That check is also
what keeps the common case cheap.

A page the heuristics (tiers 2-3) call a block but that still holds the spider's expected
content (``has_expected()`` returns True) is :attr:`BlockKind.SUSPECT`: parse it, and report it,
rather than drop data on a guess. The status tier and the spider's own ``is_blocked`` are never
second-guessed.

An empty 2xx HTML body (nothing but whitespace) is :attr:`BlockKind.EMPTY`, not a block: it is
usually a backend hiccup, worth a bounded retry (see ``classify.EMPTY_ATTEMPTS``), and blaming
the route or retiring the session for it would be wrong. A spider whose site answers bots with
empty pages says so in ``is_blocked``.

Every verdict carries a ``reason`` from :data:`REASONS` (a bounded set, fit for metric labels and
the WARC record): ``status:429``, ``vendor:cloudflare``, ``generic:captcha``,
``structure:no-text``, ``spider``, ``empty``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from crawlfleet.policy.mime import content_type

__all__ = [
    "LINK_RICH",
    "REASONS",
    "SMALL_TEXT",
    "BlockKind",
    "BlockVerdict",
    "detect_block",
    "is_html",
    "visible_text_length",
]


class BlockKind(StrEnum):
    """What a response is, as far as blocks go; stable names (metrics, attempt events)."""

    OK = "ok"
    BLOCKED = "blocked"
    SUSPECT = "suspect"
    """Looks like a block page but holds the spider's expected content: parse and report it."""
    EMPTY = "empty"
    """A 2xx HTML response with an empty body."""


@dataclass(frozen=True, slots=True)
class BlockVerdict:
    """A :class:`BlockKind` and why (``reason`` is ``""`` for OK, else one of :data:`REASONS`)."""

    kind: BlockKind
    reason: str = ""

    @property
    def blocked(self) -> bool:
        return self.kind is BlockKind.BLOCKED


_OK: Final = BlockVerdict(BlockKind.OK)
_EMPTY: Final = BlockVerdict(BlockKind.EMPTY, "empty")
_SPIDER: Final = BlockVerdict(BlockKind.BLOCKED, "spider")

#: Links in the first :data:`LINK_SCAN_BYTES` that make a page "real" (not searched for markers).
LINK_RICH: Final = 30
LINK_SCAN_BYTES: Final = 64 * 1024
#: Markers sit near the top of block pages; scanning further costs time and finds nothing more.
SCAN_BYTES: Final = 16 * 1024
#: Visible characters below which a page is "small" (generic markers and structure count).
SMALL_TEXT: Final = 1500
#: Visible characters below which a page with scripts and no link is a script shell.
_SHELL_TEXT: Final = 64

# Markers are matched against the lower-cased head of the body. Names are ``<scope>_<name>``:
# "any" counts at any size, "small" only on small pages, "ref" (Akamai's reference id) only
# beside "access denied". One pattern of plain alternatives finds them (sre skips fast to the
# bytes a marker can start with; named groups would defeat that and cost 10x); the rare match
# is then named by the table.
_MARKER_TABLE: Final[tuple[tuple[str, bytes], ...]] = (
    (
        "any_cloudflare",
        rb"_cf_chl_opt|cf-chl-|/cdn-cgi/challenge-platform/h/|cf-error-code"
        rb"|<title>just a moment\.\.\.</title>|cf-browser-verification"
        rb"|attention required! \| cloudflare",
    ),
    ("any_datadome", rb"captcha-delivery\.com"),
    ("any_perimeterx", rb"px-captcha|captcha\.px-cdn\.net"),
    ("any_akamai", rb"errors\.edgesuite\.net"),
    ("ref_akamai", rb"reference(?: |&#32;)(?:#|&#35;)\d+(?:\.|&#46;)[0-9a-f]"),
    ("any_incapsula", rb"incapsula incident id"),
    ("any_sucuri", rb"sucuri website firewall|cloudproxy@sucuri\.net"),
    ("any_distil", rb"<title>pardon our interruption"),
    ("small_perimeterx", rb"_pxappid"),
    ("small_incapsula", rb"_incapsula_resource"),
    ("small_kasada", rb"kpsdk"),
    ("small_datadome", rb"datadome"),
    ("small_cloudflare", rb"/cdn-cgi/challenge-platform/"),
    (
        "small_captcha",
        rb"g-recaptcha|google\.com/recaptcha|recaptcha/api\.js|h-captcha"
        rb"|hcaptcha\.com/1/api\.js|cf-turnstile|challenges\.cloudflare\.com/turnstile",
    ),
    (
        "small_verify_human",
        rb"verify (?:that )?you are (?:a )?human|are you a (?:robot|human)"
        rb"|i'?m not a robot|i am not a robot",
    ),
    ("small_access_denied", rb"access denied|access to this page has been denied"),
    ("small_unusual_traffic", rb"unusual traffic"),
    ("small_checking_browser", rb"checking your browser|checking if the site connection is secure"),
)
_MARKERS: Final = re.compile(b"|".join(pattern for _, pattern in _MARKER_TABLE))
# Every marker holds one of these; ``in`` is several times faster than the pattern, so a page
# without any anchor (nearly every page) is cleared without running it. Pages with much text
# only need the anchors of the markers that count at any size.
_VENDOR_ANCHORS: Final = (
    b"captcha",
    b"cf-",
    b"_cf_",
    b"challenge",
    b"moment",
    b"attention",
    b"edgesuite",
    b"reference",
    b"incapsula",
    b"sucuri",
    b"pardon",
)
_ALL_ANCHORS: Final = (
    *_VENDOR_ANCHORS,
    b"kpsdk",
    b"datadome",
    b"pxappid",
    b"human",
    b"robot",
    b"access",
    b"unusual",
    b"checking",
)
_NAMERS: Final = tuple((name, re.compile(pattern)) for name, pattern in _MARKER_TABLE)
_VENDORS: Final = (
    "cloudflare",
    "datadome",
    "perimeterx",
    "akamai",
    "incapsula",
    "kasada",
    "sucuri",
    "distil",
)
_GENERIC: Final = {
    "captcha": "generic:captcha",
    "verify_human": "generic:verify-human",
    "access_denied": "generic:access-denied",
    "unusual_traffic": "generic:unusual-traffic",
    "checking_browser": "generic:checking-browser",
}
_STATUS_REASONS: Final = {403: "status:403", 429: "status:429", 503: "status:503"}

#: Every reason a verdict can carry (bounded: safe as a metric label).
REASONS: Final[frozenset[str]] = frozenset(
    {f"vendor:{v}" for v in _VENDORS}
    | set(_GENERIC.values())
    | set(_STATUS_REASONS.values())
    | {"structure:no-text", "structure:scripts-only", "spider", "empty"}
)

# Visible text: what is left without script-like blocks and comments, tags, entities and
# whitespace. Each pattern starts with one literal byte, which sre scans for at C speed. The
# first searches on from every opener without a closer: _without_hidden_blocks uses it only
# on markup whose every opener has a closer after it.
_HIDDEN_BLOCKS: Final = re.compile(
    rb"<(script|style|noscript|template|svg)\b.*?</\1\s*>|<!--.*?-->", re.DOTALL | re.IGNORECASE
)
_TAGS: Final = re.compile(rb"<[^>]*>")
_ENTITIES: Final = re.compile(rb"&#?\w{1,8};")


def detect_block(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    spider_verdict: bool | None = None,
    has_expected: Callable[[], bool] | None = None,
) -> BlockVerdict:
    """The block verdict on a response that arrived (redirects already followed).

    ``spider_verdict`` is the spider's own ``is_blocked(response)``: True makes any response a
    block (reason ``spider``); False turns the body heuristics off (the status tier stays: it is
    the server's own word). ``has_expected`` is called only when the heuristics call a page a
    block; True turns that into :attr:`BlockKind.SUSPECT`. Statuses that are neither 2xx nor in
    the status tier are :attr:`BlockKind.OK` here: they are errors, not blocks.
    """
    if spider_verdict:
        return _SPIDER
    html = is_html(headers, body)
    if status == 429 or (status in (403, 503) and html and body.strip()):
        return _status_verdict(status, body, refine=spider_verdict is None)
    if not 200 <= status < 300 or status in (204, 205) or not html:
        return _OK
    if not body.strip():
        return _OK if spider_verdict is False else _EMPTY
    if spider_verdict is False or _link_rich(body):
        return _OK
    reason = _heuristic_reason(body)
    if reason is None:
        return _OK
    if has_expected is not None and has_expected():
        return BlockVerdict(BlockKind.SUSPECT, reason)
    return BlockVerdict(BlockKind.BLOCKED, reason)


def _status_verdict(status: int, body: bytes, *, refine: bool) -> BlockVerdict:
    # The status decides; the markers only name who blocked (vendor:cloudflare beats status:403
    # in the block-rate metric).
    reason = _heuristic_reason(body) if refine and body else None
    return BlockVerdict(BlockKind.BLOCKED, reason or _STATUS_REASONS[status])


def _heuristic_reason(body: bytes) -> str | None:
    """The reason a page looks like a block page (tiers 2 and 3), or None."""
    head = body[:SCAN_BYTES].lower()
    text = visible_text_length(body[:LINK_SCAN_BYTES], stop_at=SMALL_TEXT)
    small = text < SMALL_TEXT
    found = _found_markers(head, _ALL_ANCHORS if small else _VENDOR_ANCHORS)
    for name in found:
        if name.startswith("any_"):
            return f"vendor:{name[4:]}"
    if "ref_akamai" in found and "small_access_denied" in found:
        return "vendor:akamai"
    if not small:
        return None
    for name in found:
        if name.startswith("small_") and name[6:] in _VENDORS:
            return f"vendor:{name[6:]}"
    for name in found:
        if name.startswith("small_"):
            return _GENERIC[name[6:]]
    if text < _SHELL_TEXT and b"<script" in head and b"<a" not in head:
        return "structure:scripts-only"
    if text == 0:
        return "structure:no-text"
    return None


def _found_markers(head: bytes, anchors: tuple[bytes, ...]) -> list[str]:
    """Names of the markers present in ``head``, in order of first appearance; none unless one
    of ``anchors`` is there."""
    found: list[str] = []
    if not any(anchor in head for anchor in anchors):
        return found
    for match in _MARKERS.finditer(head):
        text = match.group()
        name = next(n for n, namer in _NAMERS if namer.fullmatch(text))
        if name not in found:
            found.append(name)
            if name.startswith("any_"):
                break  # the verdict is settled
    return found


def _link_rich(body: bytes) -> bool:
    pos = 0
    for _ in range(LINK_RICH):
        pos = body.find(b"<a", pos, LINK_SCAN_BYTES)
        if pos < 0:
            return False
        pos += 2
    return True


def visible_text_length(html: bytes, *, stop_at: int | None = None) -> int:
    """Roughly how many visible characters ``html`` has: without tags, scripts, styles,
    comments, entities and whitespace. With ``stop_at``, counting may stop once the first 4 KiB
    reach that many (content pages get there at once, so the check stays cheap)."""
    end = html.find(b"<", _TEXT_CHUNK) if stop_at is not None else -1
    if end < 0:
        return _text_length(html)
    # Cut before a tag, and past any script or comment still open there, so the first chunk
    # neither splits a tag nor hides half a script block from the patterns.
    end = _past_open_block(html, 0, end)
    first = _text_length(html[:end])
    if stop_at is not None and first >= stop_at:
        return first
    return first + _text_length(html[end:])


def _text_length(html: bytes) -> int:
    text = _without_tags(_without_hidden_blocks(html))
    if b"&" in text:
        text = _ENTITIES.sub(b" ", text)
    return len(text.translate(None, b" \t\n\r\f\v"))


_TEXT_CHUNK: Final = 4096
_OPENERS: Final = re.compile(rb"<(script|style|noscript|template|svg)\b|<!--", re.IGNORECASE)
_CLOSERS: Final = {
    tag: re.compile(rb"</" + tag + rb"\s*>", re.IGNORECASE)
    for tag in (b"script", b"style", b"noscript", b"template", b"svg")
}
_COMMENT_END: Final = re.compile(rb"-->")


def _without_tags(html: bytes) -> bytes:
    """``_TAGS.sub(b" ", html)`` in linear time: past the last ``>`` no tag can match, and the
    pattern would search to the end from every ``<`` there (``<svg a`` 10,000 times: 0.2 s)."""
    last = html.rfind(b">")
    if last < 0:
        return html
    return _TAGS.sub(b" ", html[: last + 1]) + html[last + 1 :]


def _without_hidden_blocks(html: bytes) -> bytes:
    """``html`` with its script-like blocks and comments each made one space: what
    ``_HIDDEN_BLOCKS.sub(b" ", html)`` gives, in linear time. The pattern searches to the end
    of the page from every opener without a closer (``<script>x`` 7,000 times: seconds a
    page), so it runs only where each kind's last opener has a closer after it; elsewhere a
    kind of block whose closer was not found after one opener is not looked for again, as no
    later opener of that kind can find one either."""
    if b"<" not in html:
        return html
    if _every_opener_closed(html):
        return _HIDDEN_BLOCKS.sub(b" ", html)  # one pass in C: 1,000 scripts, 0.3 ms
    parts: list[bytes] = []
    unclosed: set[bytes | None] = set()  # kinds with no closer after an opener seen
    pos = start = 0
    while (opened := _OPENERS.search(html, pos)) is not None:
        tag = opened.group(1)
        kind = None if tag is None else tag.lower()
        pos = opened.end()
        if kind in unclosed:
            continue
        closer = _COMMENT_END if kind is None else _CLOSERS[kind]
        closed = closer.search(html, pos)
        if closed is None:
            unclosed.add(kind)
            continue
        parts += (html[start : opened.start()], b" ")
        pos = start = closed.end()
    if not parts:
        return html
    parts.append(html[start:])
    return b"".join(parts)


def _every_opener_closed(html: bytes) -> bool:
    """Whether each kind's last opener (or what may be one) has a closer of its kind after it."""
    lower = html.lower()
    for kind, closer in _CLOSERS.items():
        opened = lower.rfind(b"<" + kind)
        if opened < 0:
            continue
        closed = lower.rfind(b"</" + kind)
        if closed < opened or closer.match(html, closed) is None:
            return False  # none, or one that may not be a closer: the linear scan decides
    opened = lower.rfind(b"<!--")
    return opened < 0 or lower.rfind(b"-->") >= opened + 4


def _past_open_block(html: bytes, start: int, end: int) -> int:
    """``end``, or just past the close of a script-like block or comment open at ``end``."""
    pos = start
    while True:
        opened = _OPENERS.search(html, pos, end)
        if opened is None:
            return end
        tag = opened.group(1)
        closer = _COMMENT_END if tag is None else _CLOSERS[tag.lower()]
        closed = closer.search(html, opened.end())
        if closed is None:
            return len(html)
        if closed.end() > end:
            return closed.end()
        pos = closed.end()


def is_html(headers: Mapping[str, str], body: bytes) -> bool:
    """Whether a response is HTML: by ``Content-Type``, else sniffed (empty counts as HTML, so
    an empty untyped 200 is caught as an empty page)."""
    declared = content_type(headers)  # the last one, as the Fetch standard reads them
    if declared is not None:
        return "html" in declared
    return body.lstrip()[:1] in (b"", b"<")
