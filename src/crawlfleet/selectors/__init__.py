"""Scrapy-style selectors that give parsel's answers: CSS on lexbor where it gives the same
answer, parsel (lxml) for the rest.

``Selector`` wraps one result: an element of lexbor's tree, a string (a text node or an
attribute value), or an element of lxml's tree. ``SelectorList`` is a ``list`` of them with
parsel's ``get`` / ``getall`` / ``re`` / ``re_first`` / ``attrib`` / ``css`` / ``xpath``.

CSS is parsel's, pseudo-elements included (``::text`` and ``::attr(name)``, at the end):
``h1::text`` is the text directly in each ``h1``, ``div ::text`` every text inside each
``div``; a chained ``sel.css(q)`` starts matching at ``sel`` or inside it (``li.css("li + li")``
finds the ``li`` after ``li``). Values are lxml's: ``<input checked>`` reads
``checked="checked"``, and ``get()`` of an element is lxml's serialisation.

What runs where (``crawlfleet.css`` and ``crawlfleet.document`` say why):

* on lexbor (fast): CSS queries with type, class, id and attribute tests, combinators,
  ``:is``/``:where``/``:not``/``:has`` and the structural pseudo-classes; their ``::text``,
  ``::attr()``, ``.attrib`` and ``follow_all``. Elements HTML5 implies (``tbody``,
  ``colgroup``, an empty ``head`` or ``body``) are taken out first when the query could see
  them; ids and classes are compared case-sensitively in quirks mode as well.
* on parsel, for that call only (same answer, slower): XPath; ``get()``/``re()`` of an element;
  CSS with ``:contains()``, ``:lang()``, ``:checked`` and the other form or user-action
  pseudo-classes, namespaces, value tests on attributes lxml fills in (``[selected=selected]``),
  ``head`` or ``body`` type selectors; ``::text`` of ``html``, ``head``, ``body``, ``pre`` or
  ``textarea`` (the parsers place their edge whitespace differently); chained queries with ``+``
  or ``~``, or with combinators and pseudo-classes together; every CSS query on a page with a
  ``<template>`` or with elements after ``</body>``; queries that depend on sibling order on a
  page whose ``tbody`` tags are partly implied or whose head ends in a ``<noscript>``.

XPath from a CSS result (``sel.xpath("../a/@href")``, ``following-sibling::``, ``//a``) runs on
the page's lxml tree at that element, found by its place among its siblings when both parsers
built the same siblings up to it, else as the same-numbered answer of parsel to the same CSS
query. The two parsers still repair some broken markup differently (a ``<div>`` inside a table
row, misnested ``<b><i></b></i>``, a stray ``</p>``); on such pages a CSS answer is that of
lexbor's tree, the one browsers build. One difference is kept on purpose: ``attrib`` of a
string is ``{}`` (parsel raises ``AttributeError``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from re import Pattern
from typing import TYPE_CHECKING, Any, SupportsIndex, overload

from selectolax.lexbor import LexborNode
from w3lib.html import replace_entities

from crawlfleet.selectors.css import CssExpressionError, CssSyntaxError, compile_css
from crawlfleet.selectors.document import Document
from crawlfleet.selectors.query import Raw, attributes, is_element, select

if TYPE_CHECKING:
    import parsel

__all__ = [
    "CssExpressionError",
    "CssSyntaxError",
    "Document",
    "Selector",
    "SelectorList",
    "compile_css",
    "css",
    "extract_regex",
    "select",
    "wrap_parsel",
]


def extract_regex(regex: str | Pattern[str], text: str, replace: bool = True) -> list[str]:
    """parsel's ``re()``: all matches, or the groups, or the group named ``extract``."""
    pattern = re.compile(regex) if isinstance(regex, str) else regex
    if "extract" in pattern.groupindex:
        match = pattern.search(text)
        strings = [match.group("extract")] if match and match.group("extract") else []
    else:
        strings = []
        for found in pattern.findall(text):
            strings.extend(found if isinstance(found, tuple) else [found])
    if not replace:
        return strings
    return [replace_entities(s, keep=["lt", "amp"]) for s in strings]


# -- results ---------------------------------------------------------------------------------


def css(doc: Document, query: str) -> SelectorList:
    """``select`` on the whole page, as a ``SelectorList``."""
    return _wrap(doc, select(doc, query), None, query)


def wrap_parsel(results: Iterable[parsel.Selector]) -> SelectorList:
    """parsel results as ours: strings (text, attributes, numbers) become string selectors."""
    return SelectorList(
        Selector(s if is_element(s) else str(s.get()), query=s._expr) for s in results
    )


def _wrap(doc: Document, raws: list[Raw], parent: Selector | None, query: str) -> SelectorList:
    return SelectorList(
        [
            Selector(raw, _Origin(doc, parent, query, i), query)
            if type(raw) is LexborNode
            else Selector(raw, None, query)
            for i, raw in enumerate(raws)
        ]
    )


class _Origin:
    """Where a lexbor element came from: the ``index``-th answer to ``query`` on ``parent``
    (or on the whole ``doc``), so its lxml counterpart can be asked of parsel the same way."""

    __slots__ = ("doc", "index", "parent", "query")

    def __init__(self, doc: Document, parent: Selector | None, query: str, index: int) -> None:
        self.doc = doc
        self.parent = parent
        self.query = query
        self.index = index


class Selector:
    """One selected thing: an element, a text node's text or an attribute value.

    ``get()`` is the outer HTML of an element (lxml's serialisation, as parsel gives it) or the
    string itself; ``root`` is the underlying object (a lexbor node for CSS results, an lxml
    element for parsel's, or the string). ``bool()`` is false for an empty string, as in parsel.
    """

    __slots__ = ("_answers", "_node", "_origin", "_psel", "_query", "_value")

    def __init__(
        self,
        root: LexborNode | str | parsel.Selector,
        origin: _Origin | None = None,
        query: str | None = None,
    ) -> None:
        self._query = query  # what found it, for repr
        self._node: LexborNode | None = None
        self._value: str | None = None
        self._psel: parsel.Selector | None = None
        self._origin = origin
        self._answers: dict[str, Any] | None = None
        if isinstance(root, str):
            self._value = root
        elif isinstance(root, LexborNode):
            self._node = root
        else:
            self._psel = root

    @property
    def root(self) -> Any:
        if self._node is not None:
            return self._node
        return self._psel.root if self._psel is not None else self._value

    @property
    def tag(self) -> str | None:
        """The element's tag name (lower case, as lxml has it); ``None`` for strings."""
        if self._node is not None:
            return (self._node.tag or "").lower()
        tag = getattr(self.root, "tag", None)
        return tag if isinstance(tag, str) else None

    def get(self) -> str:
        if self._value is not None:
            return self._value
        psel = self.as_parsel()
        if psel is not None:
            return str(psel.get())
        assert self._node is not None  # an element lxml's tree does not have
        return self._node.html or ""

    extract = get

    def getall(self) -> list[str]:
        return [self.get()]

    @property
    def attrib(self) -> dict[str, str]:
        """The element's attributes as lxml reads them (``{}`` for strings)."""
        if self._node is not None:
            return attributes(self._node)
        if self._psel is not None:
            return dict(self._psel.attrib)
        return {}

    def css(self, query: str) -> SelectorList:
        if self._node is not None and self._origin is not None:
            return _wrap(self._origin.doc, select(self._origin.doc, query, self), self, query)
        compile_css(query)  # bad CSS raises the same errors everywhere
        if self._psel is not None:
            return wrap_parsel(self._psel.css(query))
        return SelectorList()

    def xpath(self, query: str, **ns_vars: Any) -> SelectorList:
        """XPath 1.0 through parsel, on the page's lxml tree (an element of a CSS result is
        found there); ``ns_vars`` are parsel's ``namespaces=`` and XPath variables."""
        psel = self.as_parsel()
        if psel is not None:
            return wrap_parsel(psel.xpath(query, **ns_vars))
        if self._value is not None and query.strip() == ".":
            return SelectorList([Selector(self._value)])  # as parsel does for strings
        return SelectorList()

    def re(self, regex: str | Pattern[str], replace_entities: bool = True) -> list[str]:
        return extract_regex(regex, self.get(), replace_entities)

    def re_first(
        self,
        regex: str | Pattern[str],
        default: str | None = None,
        replace_entities: bool = True,
    ) -> str | None:
        return next(iter(self.re(regex, replace_entities)), default)

    def __bool__(self) -> bool:
        return bool(self._value) if self._value is not None else True

    def __str__(self) -> str:
        return self.get()

    def __repr__(self) -> str:
        """parsel's form; an element's data is lexbor's serialisation (a repr builds no tree)."""
        data = self._value or ""
        if self._node is not None:
            data = self._node.html or ""
        elif self._psel is not None:
            data = str(self._psel.get())
        shown = data if len(data) <= 40 else data[:37] + "..."
        return f"<Selector query={self._query!r} data={shown!r}>"

    def as_parsel(self) -> parsel.Selector | None:
        """This element as a parsel selector on the page's lxml tree (what XPath runs on).

        ``None`` for strings, and for an element lxml's tree does not have.
        """
        if self._psel is None and self._node is not None and self._origin is not None:
            doc = self._origin.doc
            element = doc.lxml_at(self._node)
            if element is None:
                element = self._by_query()
            if element is not None:
                self._psel = doc.wrap(element)
        return self._psel

    def _by_query(self) -> Any | None:
        """The element parsel gives as the same-numbered answer to the query that found us."""
        origin = self._origin
        assert origin is not None
        parent = origin.parent
        base = origin.doc.parsel if parent is None else parent.as_parsel()
        if base is None:
            return None
        cache = origin.doc.answers if parent is None else parent._answers_cache()
        answers = cache.get(origin.query)
        if answers is None:
            answers = cache[origin.query] = base.css(origin.query)
        if origin.index < len(answers):
            element = answers[origin.index].root
            if getattr(element, "tag", None) == self.tag:
                return element
        return None

    def _answers_cache(self) -> dict[str, Any]:
        if self._answers is None:
            self._answers = {}
        return self._answers


class SelectorList(list[Selector]):
    """A ``list`` of ``Selector`` with parsel's helpers; slicing gives a ``SelectorList``."""

    @overload
    def __getitem__(self, index: SupportsIndex) -> Selector: ...

    @overload
    def __getitem__(self, index: slice) -> SelectorList: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Selector | SelectorList:
        if isinstance(index, slice):
            return SelectorList(super().__getitem__(index))
        return super().__getitem__(index)

    def css(self, query: str) -> SelectorList:
        return SelectorList(s for sel in self for s in sel.css(query))

    def xpath(self, query: str, **ns_vars: Any) -> SelectorList:
        return SelectorList(s for sel in self for s in sel.xpath(query, **ns_vars))

    @overload
    def get(self, default: None = None) -> str | None: ...

    @overload
    def get(self, default: str) -> str: ...

    def get(self, default: str | None = None) -> str | None:
        """The first result's string, or ``default`` when nothing matched."""
        return self[0].get() if self else default

    extract_first = get

    def getall(self) -> list[str]:
        return [sel.get() for sel in self]

    extract = getall

    def re(self, regex: str | Pattern[str], replace_entities: bool = True) -> list[str]:
        return [s for sel in self for s in sel.re(regex, replace_entities)]

    def re_first(
        self,
        regex: str | Pattern[str],
        default: str | None = None,
        replace_entities: bool = True,
    ) -> str | None:
        for sel in self:
            for found in sel.re(regex, replace_entities):
                return found
        return default

    @property
    def attrib(self) -> dict[str, str]:
        """The first element's attributes, ``{}`` when empty."""
        return self[0].attrib if self else {}
