"""``Response``: what a spider's ``parse`` receives, with Scrapy-style selectors.

Everything is lazy, so a page costs only what its spider uses:

* ``.text`` decodes on first use (BOM > explicit ``encoding=`` > ``Content-Type`` charset (of
  the last ``Content-Type`` header, as the Fetch standard reads repeated ones) >
  ``<meta charset>``/``http-equiv`` in the first 2 KiB > UTF-8; bad bytes become U+FFFD).
* ``.css()``, ``.follow()`` and ``.follow_all()`` parse with lexbor (selectolax) on first use.
  lexbor reads at most ``Response.max_parse_size`` bytes (4 MiB): multi-megabyte single-line
  pages (inlined JSON, minified bundles) are where its time explodes, and links or fields past
  the first 4 MiB of an HTML page are vanishingly rare. ``.text``, ``.body`` and ``.xpath()``
  always see the whole page.
* ``.xpath()`` builds a parsel (lxml) tree on first use, as do the selector calls that need it
  (``crawlfleet.selectors`` lists them); a spider that only uses CSS never pays for lxml.

Links are never joined here: ``follow`` hands the href and the page's base URL (``<base href>``
or the final URL) to ``Request``, which joins lazily.
"""

from __future__ import annotations

import codecs
import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar

from multidict import CIMultiDict, CIMultiDictProxy
from selectolax.lexbor import LexborNode
from w3lib.encoding import (
    html_body_declared_encoding,
    http_content_type_encoding,
    read_bom,
    resolve_encoding,
)

from crawlfleet.policy.mime import content_type
from crawlfleet.request import STORED, Callback, FormData, Request
from crawlfleet.selectors import Document, Selector, SelectorList, css, select, wrap_parsel
from crawlfleet.urls import join

__all__ = ["Headers", "Response", "Selector", "SelectorList", "detect_encoding"]

#: elements whose ``href`` is a link to follow
LINK_TAGS = frozenset({"a", "area", "link"})
#: the HTML spec's whitespace, stripped from both ends of an href (as browsers and Scrapy do)
_HTML_SPACE = " \t\n\r\f"
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
#: ``<meta charset>`` is only honoured near the top (the HTML spec says 1024 bytes; pages in the
#: wild put a long ``<title>`` or comments first, so look a little further)
_META_SNIFF_BYTES = 2048
_MAY_HAVE_BASE = re.compile(rb"<base[\s/>]", re.IGNORECASE)


class Headers(Mapping[str, str]):
    """Read-only, case-insensitive view of a plain header mapping (the mapping itself is kept).

    Its ``repr`` masks credentials and cookies.
    """

    __slots__ = ("_lower", "_raw")

    def __init__(self, raw: Mapping[str, str]) -> None:
        self._raw = raw
        self._lower: dict[str, str] | None = None

    def __getitem__(self, name: str) -> str:
        if self._lower is None:
            self._lower = {k.lower(): v for k, v in self._raw.items()}
        return self._lower[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        shown = {k: "[secure]" if k.lower() in _SECRET_HEADERS else v for k, v in self._raw.items()}
        return f"Headers({shown!r})"


def _case_insensitive(headers: Mapping[str, str]) -> Mapping[str, str]:
    if isinstance(headers, CIMultiDict | CIMultiDictProxy | Headers):
        return headers  # already case-insensitive, and keeps repeated headers (Set-Cookie)
    return Headers(headers)


def _text_codec(label: str | None) -> str | None:
    """The Python codec for a charset label, with the WHATWG aliases; ``None`` if unusable."""
    if not label:
        return None
    name = resolve_encoding(label.strip().strip("\"'"))
    if name is None:
        return None
    # base64, zlib and friends are codecs too, but bytes-to-bytes ones: never a page's charset
    return name if getattr(codecs.lookup(name), "_is_text_encoding", True) else None


def detect_encoding(
    body: bytes, content_type: str | None = None, declared: str | None = None
) -> tuple[str, int]:
    """The codec to decode ``body`` with, and the length of its byte-order mark.

    Order: BOM > ``declared`` (e.g. a browser fetcher's) > the ``Content-Type`` charset >
    ``<meta charset>`` / ``http-equiv`` in the first 2 KiB > UTF-8. Never raises.
    """
    bom_codec, bom = read_bom(body[:4])
    if bom_codec is not None:
        return _text_codec(bom_codec) or "utf-8", len(bom or b"")
    codec = _text_codec(declared)
    if codec is None and content_type:
        codec = _text_codec(http_content_type_encoding(content_type))
    if codec is None:
        codec = _text_codec(html_body_declared_encoding(body[:_META_SNIFF_BYTES]))
        if codec is not None and codec.startswith(("utf-16", "utf-32")):
            codec = "utf-8"  # a meta tag we could read as ASCII is not in UTF-16 (HTML spec)
    return codec or "utf-8", 0


class Response:
    """A fetched page: ``url`` (final, after redirects), ``status``, ``headers``, ``body``.

    ``meta`` carries the request's meta; ``depth`` is the link distance from a start URL;
    ``request_url`` is the URL asked for (before redirects).
    """

    #: most bytes handed to lexbor; see the module docstring (change on the class to tune)
    max_parse_size: ClassVar[int] = 4 * 1024 * 1024
    #: deepest element nesting a page is parsed with, and most parse work (the sum of the
    #: nesting depths of its start tags); past either, selectors raise ``TooComplex`` and the
    #: page ends ``dead(too_complex)`` (see ``crawlfleet.nesting``)
    max_nesting: ClassVar[int] = 1000
    max_parse_work: ClassVar[int] = 100_000_000

    __slots__ = (
        "_base_url",
        "_bom",
        "_declared",
        "_doc",
        "_encoding",
        "_links_found",
        "_text",
        "_unknown_links",
        "body",
        "cb_kwargs",
        "depth",
        "headers",
        "meta",
        "request_url",
        "status",
        "url",
    )

    def __init__(
        self,
        url: str,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        *,
        meta: Mapping[str, Any] | None = None,
        depth: int = 0,
        request_url: str | None = None,
        encoding: str | None = None,
        unknown_links: Callable[[list[str], str], list[str]] | None = None,
    ) -> None:
        self.url = url
        self.status = status
        self.headers = _case_insensitive(headers)
        self.body = body
        self.meta: dict[str, Any] = dict(meta) if meta else {}
        own = self.meta.pop(STORED, None) if STORED in self.meta else None
        #: the keyword arguments the request's callback is called with (``Request(cb_kwargs=)``)
        self.cb_kwargs: dict[str, Any] = dict(own.get("cb_kwargs") or {}) if own else {}
        self.depth = depth
        self.request_url = request_url or url
        self._declared = encoding
        self._encoding: str | None = None
        self._bom = 0
        self._text: str | None = None
        self._doc: Document | None = None
        self._base_url: str | None = None
        # (hrefs, base) -> those the crawl has not judged yet: links already judged (a page's
        # menus, mostly) are skipped by follow_all before any Request is built
        self._unknown_links = unknown_links
        self._links_found = 0

    def __repr__(self) -> str:
        from crawlfleet.urls import mask_credentials

        return f"<Response {self.status} {mask_credentials(self.url)}>"

    @property
    def too_complex(self) -> str | None:
        """Why this page was refused a tree (too deep, too costly to parse), if it was."""
        return self._doc.too_complex if self._doc is not None else None

    @property
    def links_found(self) -> int:
        """Links ``follow_all`` found on this page so far (before leaving out those the crawl
        judged already): what the page offered, whatever was new."""
        return self._links_found

    @property
    def parse_truncated(self) -> bool:
        """Whether lexbor (CSS, ``follow_all``) read this page cut at ``max_parse_size``: links
        and fields past that point were not seen."""
        doc = self._doc
        return doc is not None and doc.parsed and len(self.body) - self._bom > self.max_parse_size

    # -- decoding ----------------------------------------------------------------------------

    @property
    def encoding(self) -> str:
        """The Python codec name the body is decoded with (see ``detect_encoding``)."""
        if self._encoding is None:
            declared = content_type(self.headers)  # the last Content-Type (Fetch standard)
            self._encoding, self._bom = detect_encoding(self.body, declared, self._declared)
        return self._encoding

    @property
    def text(self) -> str:
        """The body decoded (byte-order mark dropped, undecodable bytes as U+FFFD)."""
        if self._text is None:
            self._text = _decode(self.body, self._bom_length(), self.encoding)
        return self._text

    def _bom_length(self) -> int:
        _ = self.encoding  # detection also measures the byte-order mark
        return self._bom

    def json(self) -> Any:
        """The body parsed as JSON (``json.JSONDecodeError``, a ``ValueError``, if it is not)."""
        return json.loads(self.text)

    # -- selectors ---------------------------------------------------------------------------

    def _document(self) -> Document:
        if self._doc is None:
            start = self._bom_length()
            text: str | functools.partial[str]
            if self._text is not None:
                text = self._text
            else:  # a spider that only uses CSS never decodes a UTF-8 page
                text = functools.partial(_decode, self.body, start, self.encoding)
            if self.encoding == "utf-8":  # lexbor reads UTF-8 bytes itself: skip decoding
                markup: bytes | str = self.body[start : start + self.max_parse_size]
            else:
                markup = self.text[: self.max_parse_size]
            limits = (self.max_nesting, self.max_parse_work)
            self._doc = Document(markup, text, self.url, limits)
        return self._doc

    def css(self, query: str) -> SelectorList:
        """Scrapy-style CSS: ``"h1::text"``, ``"a::attr(href)"``, ``"div ::text"``, groups.

        The answers are parsel's; ``crawlfleet.selectors`` says which calls parsel runs.
        """
        return css(self._document(), query)

    def xpath(self, query: str, **ns_vars: Any) -> SelectorList:
        """XPath 1.0 through parsel (lxml), over the whole page; ``ns_vars`` are its variables."""
        return wrap_parsel(self._document().parsel.xpath(query, **ns_vars))

    # -- links -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What relative links on this page are relative to: ``<base href>``, else ``url``."""
        if self._base_url is None:
            self._base_url = self._find_base()
        return self._base_url

    def _find_base(self) -> str:
        # Parsing only to look for <base> would be a waste: look at the bytes first.
        if (self._doc is None or not self._doc.parsed) and not _MAY_HAVE_BASE.search(
            self.body[: self.max_parse_size]
        ):
            return self.url
        node = self._document().lexbor.css_first("base[href]")
        href = (node.attrs.get("href") or "").strip(_HTML_SPACE) if node is not None else ""
        return join(self.url, href) if href else self.url

    def urljoin(self, url: str) -> str:
        """``url`` made absolute against this page's base URL (``<base href>`` honoured), as a
        browser joins it (WHATWG; the same joiner as the page's links and forms)."""
        return join(self.base_url, url)

    def follow(
        self,
        url: str | Selector,
        callback: Callback | None = None,
        **request_kwargs: Any,
    ) -> Request:
        """A ``Request`` for a link on this page, joined lazily against its base URL.

        ``url`` is a string (relative or absolute), a ``Selector`` of an ``<a>``, ``<area>`` or
        ``<link>`` (its ``href``), or of a text/attribute value. ``ValueError`` if a selector
        holds no URL.
        """
        href = url if isinstance(url, str) else _href_of(url, strict=True)
        if href is None:  # only strict=False returns None; keeps the type checker informed
            raise ValueError(f"no URL in {url!r}")
        request_kwargs.setdefault("base", self.base_url)
        return Request(href, callback, **request_kwargs)

    def follow_form(
        self,
        selector_or_index: str | int | None = None,
        *,
        formdata: FormData | None = None,
        callback: Callback | None = None,
        clickdata: Mapping[str, Any] | None = None,
        dont_click: bool = False,
        formname: str | None = None,
        formid: str | None = None,
        formxpath: str | None = None,
        formnumber: int | None = None,
        formcss: str | None = None,
        url: str | None = None,
        **request_kwargs: Any,
    ) -> Request:
        """The ``Request`` that submits a form of this page, as Scrapy's
        ``FormRequest.from_response`` builds it (see :mod:`crawlfleet.forms`).

        The form: a CSS selector (of the form or of something in it; ``formcss=``), an index
        among the page's forms (``formnumber=``), ``formname=`` (else ``formid=``), ``formid=``
        or ``formxpath=``; the first form by default. Its fields (hidden ones too: CSRF tokens,
        ``__VIEWSTATE``) as a browser sends them, with ``formdata`` over them (``None`` removes
        a field; bytes are sent as they are); the first submit button clicked, or the one
        ``clickdata`` names (``{"name": "go"}``, ``{"nr": 1}``; more than one match is an
        error). ``url=`` submits to another URL than the form's action. ``FormError`` if there
        is no such form (``FormNotFound``, an ``IndexError`` too) or button.
        """

        from crawlfleet.forms import form_request

        return form_request(
            self,
            selector_or_index,
            formdata=formdata,
            callback=callback,
            clickdata=clickdata,
            dont_click=dont_click,
            formname=formname,
            formid=formid,
            formxpath=formxpath,
            formnumber=formnumber,
            formcss=formcss,
            url=url,
            **request_kwargs,
        )

    def follow_all(
        self,
        css_or_urls: str | Iterable[str | Selector] | None = None,
        callback: Callback | None = None,
        *,
        css: str | None = None,
        xpath: str | None = None,
        **request_kwargs: Any,
    ) -> Iterator[Request]:
        """``Request``s for many links: a CSS query (the string argument or ``css=``), an XPath
        query (``xpath=``), or an iterable of URLs and Selectors.

        Queries select ``<a>``/``<area>``/``<link>`` elements (their ``href``) or strings
        (``"a.next::attr(href)"``). Other elements, missing and empty hrefs are skipped, as in
        Scrapy. Give exactly one source, or ``ValueError``.
        """
        if sum(x is not None for x in (css_or_urls, css, xpath)) != 1:
            raise ValueError("follow_all needs exactly one of: urls, css, xpath")
        if isinstance(css_or_urls, str):
            css_or_urls, css = None, css_or_urls
        if css is not None:
            raws = select(self._document(), css)
            request_kwargs.setdefault("base", self.base_url)
            requests, found = _link_requests(raws, callback, request_kwargs, self._unknown_links)
            self._links_found += found
            return requests
        hrefs: Iterable[str | None]
        if xpath is not None:
            hrefs = (_href_of(sel, strict=False) for sel in self.xpath(xpath))
        else:
            hrefs = _hrefs_of(css_or_urls or ())
        request_kwargs.setdefault("base", self.base_url)
        return (Request(href, callback, **request_kwargs) for href in hrefs if href)


def _decode(body: bytes, start: int, codec: str) -> str:
    return body[start:].decode(codec, errors="replace")


def _link_requests(
    raws: list[Any],
    callback: Callback | None,
    kwargs: dict[str, Any],
    unknown: Callable[[list[str], str], list[str]] | None,
) -> tuple[Iterator[Request], int]:
    """Requests straight from lexbor results: the hottest path, so no Selector objects. Of plain
    links (no request options) only those the crawl has not judged yet (``unknown``) become
    Requests: a page's menus repeat on every page, and would otherwise cost a Request each."""
    base: str = kwargs.get("base") or ""
    plain = bool(base) and len(kwargs) == 1
    hrefs: list[str] = []
    keep = hrefs.append
    for raw in raws:
        if type(raw) is LexborNode:  # nearly every result: the lexbor element itself
            # .attributes (one dict) costs less than .attrs (a view) and its .get; one test
            # per element, no try: 200 links a page
            if raw.tag in LINK_TAGS and (href := raw.attributes.get("href")):
                href = href.strip(_HTML_SPACE)
                if href:
                    keep(href)
            continue
        if isinstance(raw, str):
            href = raw.strip(_HTML_SPACE)
        else:
            try:
                tag = raw.tag
            except AttributeError:  # a parsel selector: the query ran through parsel
                href = _href_of(Selector(raw), strict=False) or ""
            else:
                if tag not in LINK_TAGS:
                    continue  # not a link element: skipped, as Scrapy's follow_all does
                href = (raw.attrs.get("href") or "").strip(_HTML_SPACE)
        if href:
            hrefs.append(href)
    found = len(hrefs)
    if not plain:
        return (Request(href, callback, **kwargs) for href in hrefs), found
    if unknown is not None:
        hrefs = unknown(hrefs, base)
    return (Request.link(href, callback, base) for href in hrefs), found


def _hrefs_of(items: Iterable[str | Selector]) -> Iterator[str | None]:
    for item in items:
        yield item if isinstance(item, str) else _href_of(item, strict=False)


def _href_of(sel: Selector, *, strict: bool) -> str | None:
    """The URL a selector holds: a link element's href, or a text/attribute value.

    ``strict`` raises ``ValueError`` where ``follow_all`` skips (as Scrapy does).
    """
    root = sel.root
    if isinstance(root, str):
        return root.strip(_HTML_SPACE)
    tag = sel.tag
    if tag not in LINK_TAGS:
        if strict:
            raise ValueError(f"only <a>, <area> and <link> elements hold links; got <{tag}>")
        return None
    href = root.attrs.get("href") if isinstance(root, LexborNode) else root.get("href")
    if href is None and strict:
        raise ValueError(f"<{tag}> element has no href attribute: {sel!r}")
    return None if href is None else str(href).strip(_HTML_SPACE)
