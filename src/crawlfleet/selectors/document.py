"""One page behind its selectors: lexbor's tree for CSS, lxml's (through parsel) for the rest.

Each tree is built on first use, so a spider that only uses CSS never pays for lxml. The two
parsers build the same tree for well-formed HTML with four exceptions this module evens out or
reports, so that a CSS answer from lexbor is the answer parsel gives:

* HTML5 implies ``<tbody>`` and ``<colgroup>`` in a table, ``<head>`` and ``<body>``; libxml2
  does not. Before a query whose answer depends on them (``table > tr``, ``:first-child``, a
  bare ``*``), ``reshape()`` unwraps implied ``tbody`` and ``colgroup`` elements and removes
  an empty implied ``head`` or ``body``. When some ``tbody`` tags are written and others
  implied, it cannot tell which is which and says so (the query then runs through parsel).
* the content of a ``<template>`` is not part of lexbor's tree but is of lxml's, and what
  follows ``</body>`` (a late ``<script>``) is inside lexbor's ``body`` but outside lxml's
  (``html`` even, where parsel's CSS never looks). ``tree_for()`` gives no tree for such a
  page: every CSS query on it runs through parsel.
* libxml2 keeps an ``<img>`` (or any other element) inside a ``<noscript>`` in ``<head>``;
  HTML5 ends the head there and moves the rest of the head into the body. ``reshape()`` says
  it cannot even that out when the head ends with a ``<noscript>``.
* in quirks mode (no or an old doctype) lexbor matches classes and ids case-insensitively, as
  browsers do; cssselect's XPath never does (``quirks``: the query is rewritten).

``lxml_at(node)`` finds the lxml element at a lexbor element's place: the same index among
element siblings at every level from the root, where both parsers built the same siblings
(compared by tag). That is how XPath, ``get()`` and ``re()`` of a CSS result see the same
document parsel would.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from selectolax.lexbor import LexborHTMLParser, LexborNode

from crawlfleet.errors import TooComplex
from crawlfleet.selectors import nesting

if TYPE_CHECKING:
    from parsel import Selector as ParselSelector


def _start_tag(name: str) -> re.Pattern[bytes]:
    return re.compile(rb"<" + name.encode() + rb"[\s/>]", re.IGNORECASE)


_WRITTEN = {name: _start_tag(name) for name in ("head", "body")}
_WRAPPERS = {name: _start_tag(name) for name in ("tbody", "colgroup")}
#: what may follow ``</body>`` without the two parsers placing anything differently
_CLEAN_END = re.compile(
    rb"</body\s*>(?:\s|<!--.*?-->)*(?:</html\s*>(?:\s|<!--.*?-->)*)?", re.I | re.S
)


class Document:
    """A page's markup and the trees built from it.

    ``markup`` is what lexbor parses (UTF-8 bytes or text, possibly capped); ``text`` is the
    whole page as text for lxml, or a callable that decodes it on first use.
    """

    __slots__ = (
        "_base_url",
        "_lexbor",
        "_markup",
        "_parsel",
        "_positions",
        "_quirks",
        "_same",
        "_shape",
        "_text",
        "answers",
        "limits",
        "too_complex",
    )

    def __init__(
        self,
        markup: bytes | str,
        text: str | Callable[[], str],
        base_url: str | None = None,
        limits: tuple[int, int] | None = None,
    ) -> None:
        #: (deepest nesting, most parse work) a tree is built for (see ``crawlfleet.nesting``)
        self.limits = limits
        #: why the page is too complex to parse, once a tree was asked for and refused
        self.too_complex: str | None = None
        self._markup: bytes | str | None = markup
        self._text = text
        self._base_url = base_url
        self._lexbor: LexborHTMLParser | None = None
        self._parsel: ParselSelector | None = None
        self._same: bool | None = None
        self._quirks: bool | None = None
        self._shape: bool | None = None
        self._positions: dict[int, Any] = {}
        #: parsel's answers to the queries run on the whole document, for ``Selector``
        self.answers: dict[str, Any] = {}

    @property
    def lexbor(self) -> LexborHTMLParser:
        if self._lexbor is None:
            assert self._markup is not None
            self._check(self._markup)
            self._lexbor = LexborHTMLParser(self._markup)
            self._markup = None  # the parser keeps its own copy (raw_html)
        return self._lexbor

    @property
    def parsed(self) -> bool:
        """Whether lexbor's tree exists yet."""
        return self._lexbor is not None

    @property
    def lxml_parsed(self) -> bool:
        """Whether lxml's tree exists yet (a spider that only uses CSS never builds it)."""
        return self._parsel is not None

    @property
    def text(self) -> str:
        if not isinstance(self._text, str):
            self._text = self._text()
        return self._text

    @property
    def parsel(self) -> ParselSelector:
        """parsel's selector of the whole page (lxml), the one ``Response.xpath`` uses."""
        if self._parsel is None:
            import parsel

            self._check(self.text)
            self._parsel = parsel.Selector(text=self.text, base_url=self._base_url)
        return self._parsel

    def _check(self, markup: str | bytes) -> None:
        """Refuse to build a tree past the nesting limits (raises :class:`TooComplex`)."""
        if self.too_complex is None and self.limits is not None:
            self.too_complex = nesting.over(markup, *self.limits)
        if self.too_complex is not None:
            raise TooComplex(self.too_complex)

    def wrap(self, element: Any) -> ParselSelector:
        """A parsel selector of one element of ``parsel``'s tree."""
        return type(self.parsel)(root=element, type="html")

    # -- what lexbor's tree can answer -------------------------------------------------------

    def tree_for(self, shape: bool) -> LexborHTMLParser | None:
        """lexbor's tree if a CSS query can run on it, reshaped first if ``shape`` (the query
        depends on sibling order or implied elements); ``None`` if only parsel can answer."""
        if self._same is None:
            tree = self.lexbor
            self._same = not tree.tags("template") and _clean_end(tree.raw_html)
        if not self._same or (shape and not self.reshape()):
            return None
        return self._lexbor

    @property
    def quirks(self) -> bool:
        """Whether lexbor parsed the page in quirks mode (classes match case-insensitively)."""
        if self._quirks is None:
            probe = self.lexbor.create_node("div")  # detached: the tree is unchanged
            probe.attrs["class"] = "A"
            self._quirks = probe.css_matches(".a")
        return self._quirks

    def reshape(self) -> bool:
        """Bring lexbor's tree to lxml's shape (once); False where that cannot be done."""
        if self._shape is None:
            self._shape = self._reshape()
        return self._shape

    def _reshape(self) -> bool:
        tree = self.lexbor
        source = tree.raw_html
        for node, name in ((tree.head, "head"), (tree.body, "body")):
            if node is None or node.child is not None or node.attributes:
                continue
            if not _WRITTEN[name].search(source):
                node.decompose()  # implied and empty: libxml2 creates no such element
        if _head_cut_short(tree.head):
            return False
        for name, pattern in _WRAPPERS.items():
            found = tree.tags(name)
            if not found:
                continue
            written = len(pattern.findall(source))
            if written == 0:
                tree.unwrap_tags([name])
            elif written != len(found):
                return False  # some written, some implied: which is which is lost
        return True

    # -- lexbor node -> lxml element ---------------------------------------------------------

    def lxml_at(self, node: LexborNode) -> Any | None:
        """The lxml element at ``node``'s place in the page, or ``None`` where the trees differ.

        ``None`` too for a node outside the document (a copy made for a chained query).
        """
        self.reshape()  # positions are those of the reshaped tree
        chain = []
        current: LexborNode | None = node
        while current is not None and current.is_element_node:
            chain.append(current)
            current = current.parent
        if current is None or not current.is_document_node:
            return None
        found = self._positions
        top = chain.pop()
        if top.mem_id not in found:
            root = self.parsel.root
            found[top.mem_id] = root if getattr(root, "tag", None) == _tag(top) else None
        element = found[top.mem_id]
        parent = top
        for child in reversed(chain):
            if element is None:
                return None
            if child.mem_id not in found:
                self._map_children(parent, element)
            element, parent = found[child.mem_id], child
        return element

    def _map_children(self, parent: LexborNode, element: Any) -> None:
        """Pair ``parent``'s element children with ``element``'s, if their tags agree."""
        kids = []
        child = parent.child
        while child is not None:
            if child.is_element_node:
                kids.append(child)
            child = child.next
        theirs = [e for e in element if isinstance(e.tag, str)]  # not comments
        same = len(kids) == len(theirs) and all(
            _tag(k) == e.tag for k, e in zip(kids, theirs, strict=True)
        )
        for i, kid in enumerate(kids):
            self._positions[kid.mem_id] = theirs[i] if same else None


def _clean_end(source: bytes) -> bool:
    """Whether nothing but white space and comments follows the last ``</body>``."""
    end = source.rfind(b"</body")  # from the end, where it usually is: fast
    if end < 0:
        end = source.rfind(b"</BODY")
    if end < 0:
        return True
    match = _CLEAN_END.match(source, end)
    return match is not None and match.end() == len(source)


def _head_cut_short(head: LexborNode | None) -> bool:
    """Whether the head ends with a ``<noscript>``: where HTML5 may have ended it early."""
    last = None if head is None else head.last_child
    while last is not None and not last.is_element_node:
        last = last.prev
    return last is not None and last.tag == "noscript"


def _tag(node: LexborNode) -> str:
    return (node.tag or "").lower()  # libxml2 lowercases SVG's camelCase names too
