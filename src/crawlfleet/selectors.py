"""Scrapy-style selectors: CSS through lexbor, XPath through parsel (lxml) only when asked.

``Selector`` wraps one result: an element of the lexbor tree, a string (a text node or an
attribute value), or an element that XPath found through parsel. ``SelectorList`` is a ``list``
of them with the familiar ``get`` / ``getall`` / ``re`` / ``css`` / ``xpath`` helpers.

CSS follows parsel (and so Scrapy) exactly, including its pseudo-elements, allowed only at the
end of a selector:

* ``h1::text``: the text nodes that are direct children of each ``h1``;
* ``div ::text`` (or ``div *::text``): every text node inside each ``div``;
* ``a::attr(href)``: attribute values; ``div ::attr(id)``: of each ``div`` and everything in it;
* chained ``sel.css(q)`` matches within ``sel``'s subtree, ``sel`` itself included, with every
  part of ``q`` inside that subtree (parsel's ``descendant-or-self::`` scoping).

Known differences from parsel come from the parsers, not the selectors: lexbor builds the HTML5
tree a browser builds (``<tbody>`` inserted, whitespace between ``</head>`` and ``<body>`` kept),
where libxml2 drops or keeps a few whitespace-only text nodes and repairs bad markup its own way;
``get()`` of an element is lexbor's HTML5 serialisation (``disabled=""``, ``&nbsp;``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from re import Pattern
from typing import TYPE_CHECKING, Any, SupportsIndex, overload

from selectolax.lexbor import LexborHTMLParser, LexborNode, SelectolaxError
from w3lib.html import replace_entities

if TYPE_CHECKING:
    import parsel

#: anything lexbor can run a CSS query against: a whole document or one element
Context = LexborHTMLParser | LexborNode
#: one raw result: an element node, or a string (text node or attribute value)
Raw = LexborNode | str

_PSEUDO_AT_END = re.compile(r"::(text|attr\(\s*([^()\s]+)\s*\))\s*$")
_COMBINATORS = ">+~"


@dataclass(frozen=True, slots=True)
class CssGroup:
    """One comma-separated group of a CSS query, split into what lexbor runs and what we do.

    ``css`` selects elements; ``pseudo`` is ``""`` (the elements), ``"text"`` or ``"attr"``;
    ``deep`` widens the elements to everything inside them (``div ::text``); ``complex`` means
    ``css`` has combinators, so a chained query must be confined to the context's subtree.
    """

    css: str
    pseudo: str = ""
    attr: str = ""
    deep: bool = False
    complex: bool = False

    @property
    def output(self) -> tuple[str, str, bool]:
        """Groups with equal ``output`` can share one lexbor query."""
        return (self.pseudo, self.attr, self.deep)


def _mask(query: str) -> str:
    """``query`` with quoted, bracketed and parenthesised parts blanked out (same length).

    Lets the splitting below look for ``,`` ``::`` and combinators at the top level only, so
    ``a[title="x, y"]`` and ``:is(h1, h2)`` stay whole.
    """
    out: list[str] = []
    quote = ""
    depth = 0
    escaped = False
    for ch in query:
        if escaped:
            escaped = False
            out.append("_")
            continue
        if ch == "\\":
            escaped = True
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
            continue
        out.append("_")
    return "".join(out)


def _split_groups(query: str) -> list[tuple[str, str]]:
    """Top-level comma groups of ``query``, each as ``(text, masked text)``."""
    masked = _mask(query)
    groups, start = [], 0
    for i, ch in enumerate(masked + ","):
        if ch == ",":
            groups.append((query[start:i], masked[start:i]))
            start = i + 1
    return groups


def _has_combinator(masked: str) -> bool:
    inner = masked.strip()
    return any(c in inner for c in _COMBINATORS) or any(c.isspace() for c in inner)


def _compile_group(text: str, masked: str) -> CssGroup:
    text, masked = text.strip(), masked.strip()
    pseudo, attr = "", ""
    match = _PSEUDO_AT_END.search(text)
    if match is not None and masked.startswith("::", match.start()):  # not inside quotes
        pseudo = "text" if match.group(1) == "text" else "attr"
        attr = text[match.start(2) : match.end(2)] if pseudo == "attr" else ""
        text, masked = text[: match.start()], masked[: match.start()]
    if "::" in masked:
        raise ValueError(f"pseudo-elements go at the end of a selector: {text!r}")
    if not pseudo:
        if not masked.strip():
            raise ValueError("empty selector in CSS query")
        return CssGroup(text.strip(), complex=_has_combinator(masked))
    return _pseudo_group(text, masked, pseudo, attr)


def _pseudo_group(text: str, masked: str, pseudo: str, attr: str) -> CssGroup:
    """The elements a pseudo-element applies to, as parsel's translator decides them.

    ``X ::text`` and ``X *::text`` mean X and everything inside it; ``X > ::text`` means the
    children of X; a bare ``::text`` or ``*::text`` means every element (the context included).
    """
    head = masked.rstrip()
    deep = False
    if head.endswith("*") and (len(head) == 1 or head[-2].isspace()):
        before = head[:-1].rstrip()
        if not before:
            head = ""
        elif before[-1] not in _COMBINATORS:
            head, deep = before, True
    elif head != masked and head and head[-1] not in _COMBINATORS:
        deep = True  # "X ::text": a descendant combinator with nothing after it
    if head and head[-1] in _COMBINATORS:
        return CssGroup(f"{text[: len(head)]} *", pseudo, attr, complex=True)
    css = text[: len(head)].strip() or "*"
    return CssGroup(css, pseudo, attr, deep, complex=_has_combinator(head))


@functools.lru_cache(maxsize=2048)
def compile_css(query: str) -> tuple[CssGroup, ...]:
    """Split a Scrapy-style CSS query into groups lexbor can run (cached: spiders repeat them)."""
    if not query.strip():
        raise ValueError("empty CSS query")
    return tuple(_compile_group(text, masked) for text, masked in _split_groups(query))


def _run(context: Context, css: str) -> list[LexborNode]:
    try:
        return context.css(css)
    except SelectolaxError as exc:
        raise ValueError(f"invalid CSS selector {css!r}: {exc}") from exc


def _attr_value(node: LexborNode, name: str) -> str | None:
    attrs = node.attrs
    if name not in attrs:
        return None
    return attrs.get(name) or ""  # a valueless attribute (``<input disabled>``) reads as ""


def _widen(nodes: list[LexborNode], with_text: bool) -> Iterator[LexborNode]:
    """Each node and everything inside it, in document order, nested matches only once."""
    seen: set[int] = set()
    for node in nodes:
        if node.mem_id in seen:
            continue  # inside an earlier match: already walked
        for inner in node.traverse(include_text=with_text):
            seen.add(inner.mem_id)
            yield inner


def _text_nodes(context: Context, nodes: list[LexborNode], group: CssGroup) -> Iterator[LexborNode]:
    """Text nodes of the matched elements (and of everything inside them when ``deep``)."""
    if group.deep:
        yield from (n for n in _widen(nodes, True) if n.is_text_node)
    elif len(nodes) > 1 and _may_nest(context, group):
        # A text after a nested match comes after that match's texts: walk in document order.
        matched = {n.mem_id for n in nodes}
        for node in _widen(nodes, True):
            if node.is_text_node and (parent := node.parent) and parent.mem_id in matched:
                yield node
    else:
        for node in nodes:
            yield from (c for c in node.iter(include_text=True) if c.is_text_node)


def _may_nest(context: Context, group: CssGroup) -> bool:
    """Whether one match may sit inside another; lexbor answers for a simple selector."""
    if group.complex or "," in _mask(group.css):
        return True
    return context.css_first(f"{group.css} {group.css}") is not None


def _attr_owners(nodes: list[LexborNode], group: CssGroup) -> Iterator[tuple[LexborNode, str]]:
    for node in _widen(nodes, False) if group.deep else nodes:
        if node.is_element_node and (value := _attr_value(node, group.attr)) is not None:
            yield node, value


def _extract(context: Context, nodes: list[LexborNode], group: CssGroup) -> list[Raw]:
    """Apply ``group``'s pseudo-element to the elements lexbor matched."""
    if not group.pseudo:
        return list(nodes)
    if group.pseudo == "text":
        return [n.text_content or "" for n in _text_nodes(context, nodes, group)]
    return [value for _, value in _attr_owners(nodes, group)]


def _merge(context: Context, groups: tuple[CssGroup, ...]) -> list[Raw]:
    """Groups with different pseudo-elements: union them in document order, as XPath does."""
    root = context.root if isinstance(context, LexborHTMLParser) else context
    if root is None:
        return []
    position = {n.mem_id: i for i, n in enumerate(root.traverse(include_text=True))}
    # Keys sort like XPath document order: an element, then its attributes, then its content;
    # a node two groups both select is kept once.
    found: dict[tuple[int, int, int], Raw] = {}
    for group in groups:
        nodes = _run(context, group.css)
        if not group.pseudo:
            found.update(((position[n.mem_id], 0, 0), n) for n in nodes)
        elif group.pseudo == "text":
            for text in _text_nodes(context, nodes, group):
                found[(position[text.mem_id], 0, 0)] = text.text_content or ""
        else:
            for owner, value in _attr_owners(nodes, group):
                index = list(owner.attrs.keys()).index(group.attr)
                found[(position[owner.mem_id], 1, index)] = value
    return [found[key] for key in sorted(found)]


def select(context: Context, query: str) -> list[Raw]:
    """Run a Scrapy-style CSS ``query``: element nodes, or strings for ``::text``/``::attr()``.

    ``context`` is a document (the whole page) or an element (a chained query, scoped to it).
    """
    groups = compile_css(query)
    if isinstance(context, LexborNode) and any(g.complex for g in groups):
        # lexbor matches combinators against the whole document (querySelectorAll); parsel
        # only within the context. A detached copy of the subtree has no outside to match.
        context = context.clone()
    first = groups[0]
    if all(g.output == first.output for g in groups):
        if len(groups) > 1:  # one query, one pass
            css = ", ".join(g.css for g in groups)
            first = CssGroup(css, *first.output, complex=any(g.complex for g in groups))
        return _extract(
            context, _run(context, first.css), first
        )  # lexbor returns a union in document order
    return _merge(context, groups)


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


class Selector:
    """One selected thing: an element, a text node's text or an attribute value.

    ``get()`` is the outer HTML of an element or the string itself; ``root`` is the underlying
    object (a lexbor node, an lxml element for XPath results, or the string).
    """

    __slots__ = ("_node", "_psel", "_value")

    def __init__(self, root: LexborNode | str | parsel.Selector) -> None:
        self._node: LexborNode | None = None
        self._value: str | None = None
        self._psel: Any = None
        if isinstance(root, str):
            self._value = root
        elif isinstance(root, LexborNode):
            self._node = root
        else:
            self._psel = root

    @property
    def root(self) -> Any:
        if self._psel is not None:
            return self._psel.root
        return self._node if self._node is not None else self._value

    @property
    def tag(self) -> str | None:
        """The element's tag name; ``None`` for strings."""
        if self._node is not None:
            return self._node.tag
        tag = getattr(self.root, "tag", None)
        return tag if isinstance(tag, str) else None

    def get(self) -> str:
        if self._value is not None:
            return self._value
        if self._node is not None:
            return self._node.html or ""
        return str(self._psel.get())

    extract = get

    def getall(self) -> list[str]:
        return [self.get()]

    @property
    def attrib(self) -> dict[str, str]:
        """The element's attributes (``{}`` for strings); valueless attributes read as ``""``."""
        if self._node is not None:
            return {k: v or "" for k, v in self._node.attributes.items()}
        if self._psel is not None:
            return dict(self._psel.attrib)
        return {}

    def css(self, query: str) -> SelectorList:
        if self._node is not None:
            return SelectorList(Selector(r) for r in select(self._node, query))
        if self._psel is not None:
            return wrap_parsel(self._psel.css(query))
        return SelectorList()

    def xpath(self, query: str, **ns_vars: Any) -> SelectorList:
        """XPath through parsel; an element from a CSS query is re-parsed (lxml) on first use."""
        if self._psel is None and self._node is not None:
            self._psel = _parsel_for(self._node)
        if self._psel is None:
            return SelectorList()
        return wrap_parsel(self._psel.xpath(query, **ns_vars))

    def re(self, regex: str | Pattern[str], replace_entities: bool = True) -> list[str]:
        return extract_regex(regex, self.get(), replace_entities)

    def re_first(
        self,
        regex: str | Pattern[str],
        default: str | None = None,
        replace_entities: bool = True,
    ) -> str | None:
        return next(iter(self.re(regex, replace_entities)), default)

    def __repr__(self) -> str:
        data = self.get()
        return f"<Selector data={data[:40] + '...' if len(data) > 40 else data!r}>"


def _parsel_for(node: LexborNode) -> parsel.Selector:
    """A parsel selector on a copy of ``node`` (its outer HTML parsed again by lxml)."""
    import parsel

    doc = parsel.Selector(text=node.html or "")
    found = doc.xpath("descendant-or-self::*[name()=$tag][1]", tag=node.tag or "")
    return found[0] if found else doc


def wrap_parsel(results: Iterable[parsel.Selector]) -> SelectorList:
    """parsel results as ours: strings (text, attributes, numbers) become string selectors."""
    out = SelectorList()
    for sel in results:
        root = sel.root
        is_element = hasattr(root, "tag") and not isinstance(root, str)
        out.append(Selector(sel if is_element else str(sel.get())))
    return out


class SelectorList(list[Selector]):
    """A ``list`` of ``Selector`` with Scrapy's helpers; slicing gives a ``SelectorList``."""

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
