"""Running a CSS query: on lexbor's tree where it gives parsel's answer, else through parsel.

``select(doc, query, within)`` is the one entry point; ``crawlfleet.selectors`` wraps what it
returns and lists which calls end up where. Everything here works on raw results (lexbor
nodes and strings) so that ``follow_all`` can build requests without a ``Selector`` per link.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from selectolax.lexbor import LexborHTMLParser, LexborNode, SelectolaxError

from crawlfleet.selectors.css import BOOLEAN_ATTRIBUTES, CompiledCss, CssGroup, compile_css
from crawlfleet.selectors.document import Document

if TYPE_CHECKING:
    import parsel

#: anything lexbor can run a CSS query against: a whole document or one element
Context = LexborHTMLParser | LexborNode
#: one raw result: a lexbor element, a string (text or attribute value), or a parsel element
Raw = Any


class Within(Protocol):
    """The element a chained query runs within (a :class:`crawlfleet.selectors.Selector`)."""

    @property
    def root(self) -> Any: ...

    def as_parsel(self) -> parsel.Selector | None: ...


#: elements whose direct text the two parsers build differently (whitespace at the edges of
#: html/head/body, the first newline of pre/textarea)
_TEXT_DIFFERS = frozenset({"html", "head", "body", "pre", "textarea", "listing"})


class _AskParsel(Exception):
    """lexbor's answer would differ from parsel's: run the query through parsel."""


def select(doc: Document, query: str, within: Within | None = None) -> list[Raw]:
    """Run a Scrapy-style CSS ``query`` on the page, or chained within an element's subtree.

    Returns lexbor elements, strings (``::text``, ``::attr()``) and, where parsel answered,
    parsel selectors of lxml elements, in document order.
    """
    compiled = compile_css(query)
    # a chained query with combinators runs on a copy of the context's subtree: copy it from
    # the reshaped tree
    shape = compiled.shape or (within is not None and compiled.complex)
    tree = doc.tree_for(shape) if compiled.lexbor else None
    if tree is not None:
        context = tree if within is None else within.root
        if isinstance(context, Context) and (within is None or compiled.scoped):
            try:
                return _on_lexbor(context, compiled, compiled.classes and doc.quirks)
            except _AskParsel:
                pass
    return _on_parsel(doc, query, within)


def _on_parsel(doc: Document, query: str, within: Within | None) -> list[Raw]:
    base = doc.parsel if within is None else within.as_parsel()
    if base is None:
        return []
    return [sel if is_element(sel) else str(sel.get()) for sel in base.css(query)]


def is_element(sel: parsel.Selector) -> bool:
    """Whether a parsel result is an element (not a string, a number or a boolean)."""
    root = sel.root
    return hasattr(root, "tag") and not isinstance(root, str)


def _on_lexbor(context: Context, compiled: CompiledCss, quirks: bool) -> list[Raw]:
    if compiled.complex and isinstance(context, LexborNode):
        # lexbor matches combinators against the whole document (querySelectorAll); parsel
        # only within the context. A detached copy of the subtree has no outside to match.
        context = context.clone()
    if compiled.single:  # one query, one pass: lexbor returns a union in document order
        css = compiled.quirks_css if quirks else compiled.css
        nodes = _run(context, css)
        return _extract(context, nodes, compiled.groups[0], css, compiled.nested)
    return _merge(context, compiled.groups, quirks)


def _css(group: CssGroup, quirks: bool) -> str:
    return group.quirks_css if quirks else group.css


def _run(context: Context, css: str) -> list[LexborNode]:
    try:
        return context.css(css)
    except SelectolaxError as exc:  # a form cssselect accepts and lexbor does not
        raise _AskParsel from exc


def attr_value(node: LexborNode, name: str) -> str | None:
    """An attribute as lxml reads it, ``None`` if ``node`` has none by that name."""
    attrs = node.attrs
    if name not in attrs:
        return None
    return _as_lxml(name, attrs.get(name))


def attributes(node: LexborNode) -> dict[str, str]:
    """All of an element's attributes as lxml reads them (names in lower case, as in lxml)."""
    return {name.lower(): _as_lxml(name.lower(), v) for name, v in node.attributes.items()}


def _as_lxml(name: str, value: str | None) -> str:
    if value is None:  # written without a value: libxml2 fills in its known boolean ones
        return name if name in BOOLEAN_ATTRIBUTES else ""
    return value


def _widen(nodes: list[LexborNode], with_text: bool) -> Iterator[LexborNode]:
    """Each node and everything inside it, in document order, nested matches only once."""
    seen: set[int] = set()
    for node in nodes:
        if node.mem_id in seen:
            continue  # inside an earlier match: already walked
        for inner in node.traverse(include_text=with_text):
            seen.add(inner.mem_id)
            yield inner


def _text_nodes(
    context: Context, nodes: list[LexborNode], group: CssGroup, css: str, nested: bool
) -> Iterator[LexborNode]:
    """Text nodes of the matched elements (and of everything inside them when ``deep``)."""
    if group.deep:
        for node in _widen(nodes, True):
            if node.is_text_node:
                yield node
            elif node.tag in _TEXT_DIFFERS:
                raise _AskParsel
    elif len(nodes) > 1 and (nested or context.css_first(f"{css} {css}") is not None):
        # A text after a nested match comes after that match's texts: walk in document order.
        if any(n.tag in _TEXT_DIFFERS for n in nodes):
            raise _AskParsel
        matched = {n.mem_id for n in nodes}
        for node in _widen(nodes, True):
            if node.is_text_node and (parent := node.parent) and parent.mem_id in matched:
                yield node
    else:
        for owner in nodes:
            if owner.tag in _TEXT_DIFFERS:
                raise _AskParsel
            yield from (c for c in owner.iter(include_text=True) if c.is_text_node)


def _attr_owners(nodes: list[LexborNode], group: CssGroup) -> Iterator[tuple[LexborNode, str]]:
    for node in _widen(nodes, False) if group.deep else nodes:
        if node.is_element_node and (value := attr_value(node, group.attr)) is not None:
            yield node, value


def _extract(
    context: Context, nodes: list[LexborNode], group: CssGroup, css: str, nested: bool
) -> list[Raw]:
    """Apply ``group``'s pseudo-element to the elements lexbor matched."""
    if not group.pseudo:
        return list(nodes)
    if group.pseudo == "text":
        return [n.text_content or "" for n in _text_nodes(context, nodes, group, css, nested)]
    return [value for _, value in _attr_owners(nodes, group)]


def _merge(context: Context, groups: tuple[CssGroup, ...], quirks: bool) -> list[Raw]:
    """Groups with different pseudo-elements: union them in document order, as XPath does."""
    root = context.root if isinstance(context, LexborHTMLParser) else context
    if root is None:
        return []
    position = {n.mem_id: i for i, n in enumerate(root.traverse(include_text=True))}
    # Keys sort like XPath document order: an element, then its attributes, then its content;
    # a node two groups both select is kept once.
    found: dict[tuple[int, int, int], Raw] = {}
    for group in groups:
        css = _css(group, quirks)
        nodes = _run(context, css)
        if not group.pseudo:
            found.update(((position[n.mem_id], 0, 0), n) for n in nodes)
        elif group.pseudo == "text":
            for text in _text_nodes(context, nodes, group, css, True):
                found[(position[text.mem_id], 0, 0)] = text.text_content or ""
        else:
            for owner, value in _attr_owners(nodes, group):
                index = [name.lower() for name in owner.attributes].index(group.attr)
                found[(position[owner.mem_id], 1, index)] = value
    return [found[key] for key in sorted(found)]
