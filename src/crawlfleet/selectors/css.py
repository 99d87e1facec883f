"""Scrapy-style CSS queries, parsed the way parsel parses them and rewritten for lexbor.

``compile_css(query)`` runs parsel's own translator first, so a bad query raises what parsel
raises (``CssSyntaxError``, a ``cssselect.SelectorSyntaxError``, or ``CssExpressionError``, a
``cssselect.ExpressionError``; both are also ``ValueError``). It then walks cssselect's parse
tree to decide, once per query string, two things:

* whether lexbor answers the query exactly as parsel's XPath does (``CompiledCss.lexbor``). It
  does for type, class, id and attribute tests, the four combinators, ``:is``/``:where``/
  ``:not``/``:has`` and the structural pseudo-classes (``:nth-child()``, ``:first-of-type``,
  ``:empty``, ``:root``...). It does not for ``:contains()``, ``:lang()``, the user-action and
  form pseudo-classes (``:checked``, ``:hover``...), namespaces, ``!=``, value tests on the
  attributes lxml fills in when they have no value (``[checked=checked]``), attribute names in
  capitals and ``head``/``body`` type selectors (where the two parsers close ``<head>`` at
  different places); those queries run through parsel.
* the CSS lexbor runs for each comma group, with the pseudo-element (``::text``,
  ``::attr(name)``) taken off. Attribute tests get the ``s`` flag (lexbor compares ``type``,
  ``rel`` and other HTML attributes case-insensitively; cssselect never does), and a second
  form spells classes and ids as attribute tests for documents in quirks mode, where lexbor
  matches classes case-insensitively as browsers do.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from cssselect import ExpressionError, SelectorSyntaxError, parse
from cssselect.parser import (
    Attrib,
    Class,
    CombinedSelector,
    Element,
    Function,
    FunctionalPseudoElement,
    Hash,
    Matching,
    Negation,
    Pseudo,
    Relation,
    SpecificityAdjustment,
)
from cssselect.parser import Selector as ParsedSelector

#: attributes libxml2 gives their own name as value when written without one (``<input
#: checked>`` reads ``checked="checked"`` in lxml), so a value test on them can differ
BOOLEAN_ATTRIBUTES = frozenset(
    {
        "checked",
        "compact",
        "declare",
        "defer",
        "disabled",
        "ismap",
        "multiple",
        "nohref",
        "noresize",
        "noshade",
        "nowrap",
        "readonly",
        "selected",
    }
)
#: pseudo-classes lexbor implements as cssselect translates them
_STRUCTURAL = frozenset(
    {
        "first-child",
        "last-child",
        "only-child",
        "first-of-type",
        "last-of-type",
        "only-of-type",
        "empty",
        "root",
    }
)
_NTH = frozenset({"nth-child", "nth-last-child", "nth-of-type", "nth-last-of-type"})
#: elements lexbor's HTML5 tree and libxml2's tree place differently (see Document)
_UNSTABLE_TYPES = frozenset({"head", "body"})
#: elements HTML5 implies and libxml2 does not (see Document.reshape)
_IMPLIED = frozenset({"tbody", "colgroup", "head", "body"})
_OPERATORS = frozenset({"exists", "=", "~=", "|=", "^=", "$=", "*="})


class CssSyntaxError(SelectorSyntaxError, ValueError):
    """A CSS query that does not parse (parsel raises cssselect's ``SelectorSyntaxError``)."""


class CssExpressionError(ExpressionError, ValueError):
    """A CSS query that parses but cannot be run: an unknown pseudo-class or pseudo-element."""


@dataclass(frozen=True, slots=True)
class CssGroup:
    """One comma group: the elements lexbor selects, and what to take from them.

    ``css`` selects the elements (``quirks_css`` in a quirks-mode document; both empty when
    only parsel can run the query); ``pseudo`` is ``""`` (the elements), ``"text"`` or
    ``"attr"``; ``deep`` widens the elements to everything inside them (``div ::text``);
    ``complex`` means the elements are found through combinators.
    """

    css: str
    pseudo: str = ""
    attr: str = ""
    deep: bool = False
    complex: bool = False
    quirks_css: str = ""

    @property
    def output(self) -> tuple[str, str, bool]:
        """Groups with equal ``output`` can share one lexbor query."""
        return (self.pseudo, self.attr, self.deep)


@dataclass(frozen=True, slots=True)
class CompiledCss:
    """A whole query: its groups and what lexbor needs to answer it as parsel would.

    ``lexbor``: False when only parsel can answer (see the module docstring). ``shape``: the
    answer depends on where elements sit among their siblings or on elements HTML5 implies
    (``>``, ``+``, ``~``, structural pseudo-classes, a bare ``*``, ``tbody``), so lexbor's tree
    must first be brought to lxml's shape. ``scoped``: a chained query (``sel.css(q)``) can run
    on lexbor (no sibling combinator, and no pseudo-class together with combinators, which
    would look outside the copy of the context's subtree it runs on). ``classes``: uses class
    or id selectors.

    When every group takes the same from its elements (``single``), lexbor runs them as one
    query: ``css`` (``quirks_css`` in quirks mode), extracted as ``groups[0]`` says; ``nested``
    says its matches may sit inside one another.
    """

    groups: tuple[CssGroup, ...]
    lexbor: bool = True
    shape: bool = False
    scoped: bool = True
    classes: bool = False
    complex: bool = False
    single: bool = True
    nested: bool = False
    css: str = ""
    quirks_css: str = ""


@functools.lru_cache(maxsize=2048)
def compile_css(query: str) -> CompiledCss:
    """Compile a Scrapy-style CSS query (cached: spiders repeat the same few)."""
    from parsel.csstranslator import css2xpath

    try:
        css2xpath(query)  # parsel's own checks, in parsel's order
        parsed = parse(query)
    except SelectorSyntaxError as exc:
        raise CssSyntaxError(str(exc)) from exc
    except ExpressionError as exc:
        raise CssExpressionError(str(exc)) from exc
    split = [_split(selector) for selector in parsed]
    flags = [_Flags.of(group, chain) for group, chain in split]
    lexbor = all(f.lexbor for f in flags)
    groups = tuple(_rendered(group, chain) if lexbor else group for group, chain in split)
    first = groups[0]
    return CompiledCss(
        groups,
        lexbor=lexbor,
        shape=any(f.shape for f in flags),
        scoped=all(f.scoped for f in flags),
        classes=any(f.classes for f in flags),
        complex=any(g.complex for g in groups),
        single=all(g.output == first.output for g in groups),
        nested=len(groups) > 1 or first.complex,
        css=", ".join(g.css for g in groups),
        quirks_css=", ".join(g.quirks_css for g in groups),
    )


def _split(selector: ParsedSelector) -> tuple[CssGroup, list[Any]]:
    """What one parsed selector takes from its elements (a group without CSS yet), and the
    chain that finds the elements: ``[compound, combinator, compound, ...]``."""
    chain = _chain(selector.parsed_tree)
    pseudo, attr = "", ""
    element = selector.pseudo_element
    if element == "text":
        pseudo = "text"
    elif isinstance(element, FunctionalPseudoElement):  # parsel accepts only ::attr(name)
        pseudo, attr = "attr", str(element.arguments[0].value)
    # parsel turns "X ::text" (X, a descendant combinator, a bare *) into X's text and that of
    # everything inside X; "X > ::text" stays the text of X's children.
    deep = bool(pseudo) and len(chain) >= 3 and chain[-2] == " " and _bare(chain[-1])
    if deep:
        chain = chain[:-2]
    return CssGroup("", pseudo, attr, deep, len(chain) > 1), chain


def _rendered(group: CssGroup, chain: list[Any]) -> CssGroup:
    css, quirks = _render_chain(chain, quirks=False), _render_chain(chain, quirks=True)
    return CssGroup(css, group.pseudo, group.attr, group.deep, group.complex, quirks)


@dataclass(frozen=True, slots=True)
class _Flags:
    """What one group's chain needs; see ``CompiledCss``."""

    lexbor: bool
    shape: bool
    scoped: bool
    classes: bool

    @classmethod
    def of(cls, group: CssGroup, chain: list[Any]) -> _Flags:
        compounds, combinators = chain[::2], chain[1::2]
        nodes = [n for compound in compounds for n in _walk(compound)]
        nested = [n.combinator for n in nodes if isinstance(n, CombinedSelector)]
        shape = (
            any(c != " " for c in [*combinators, *nested])
            or any(isinstance(n, Pseudo | Function | Relation) for n in nodes)
            or any(isinstance(n, Element) and (n.element or "").lower() in _IMPLIED for n in nodes)
            or any(map(_may_be_implied, compounds))
        )
        looks_around = any(isinstance(n, _PSEUDO_CLASSES) for n in nodes)
        return cls(
            lexbor=all(map(_lexbor_agrees, nodes)) and _attr_ok(group.attr),
            shape=shape,
            scoped=not any(c in "+~" for c in combinators) and not (combinators and looks_around),
            classes=any(isinstance(n, Class | Hash) for n in nodes),
        )


def _chain(tree: Any) -> list[Any]:
    """``a > b c`` as ``[a, ">", b, " ", c]`` (cssselect nests combinations to the left)."""
    if isinstance(tree, CombinedSelector):
        return [*_chain(tree.selector), tree.combinator, tree.subselector]
    return [tree]


def _bare(compound: Any) -> bool:
    return isinstance(compound, Element) and not compound.element and not compound.namespace


_PSEUDO_CLASSES = (Pseudo, Function, Negation, Matching, SpecificityAdjustment, Relation)


def _walk(tree: Any) -> Iterator[Any]:
    """Every node of a parse tree, nested selectors (``:not``, ``:is``, ``:has``) included."""
    yield tree
    if isinstance(tree, CombinedSelector):
        yield from _walk(tree.selector)
        yield from _walk(tree.subselector)
        return
    inner = getattr(tree, "selector", None)
    if inner is not None:
        yield from _walk(inner)
    if isinstance(tree, Negation):
        yield from _walk(tree.subselector)
    elif isinstance(tree, Matching | SpecificityAdjustment):
        for listed in tree.selector_list:
            yield from _walk(listed)
    elif isinstance(tree, Relation) and _relative_ok(tree):
        for _, relative in tree.arguments:
            yield from _walk(relative.parsed_tree)


def _relative_ok(node: Relation) -> bool:
    """Whether ``:has()`` arguments are ``(combinator, selector)`` pairs, as rendered here."""
    return all(isinstance(arg, tuple) and len(arg) == 2 for arg in node.arguments)


def _lexbor_agrees(node: Any) -> bool:
    """Whether lexbor evaluates this node of a parse tree as cssselect's XPath does."""
    if isinstance(node, Element):
        return not node.namespace and (node.element or "").lower() not in _UNSTABLE_TYPES
    if isinstance(node, Attrib):  # names in lower case, as cssselect's HTML translator has them
        if node.namespace or node.operator not in _OPERATORS:
            return False
        return node.operator == "exists" or node.attrib.lower() not in BOOLEAN_ATTRIBUTES
    if isinstance(node, Pseudo):
        return node.ident in _STRUCTURAL
    if isinstance(node, Function):
        return node.name in _NTH
    if isinstance(node, Relation):
        return _relative_ok(node)
    return isinstance(node, Hash | Class | Negation | Matching | SpecificityAdjustment)


def _attr_ok(name: str) -> bool:
    # libxml2 lowercases attribute names, so parsel's ::attr(viewBox) never matches anything;
    # lexbor keeps SVG's camelCase and would find it.
    return name == name.lower()


def _may_be_implied(compound: Any) -> bool:
    """Whether a compound can match an element HTML5 implies (they have no attributes)."""
    node = compound
    while not isinstance(node, Element):
        if isinstance(node, Class | Hash | Attrib):
            return False
        node = node.selector
    return (node.element or "*").lower() in {"*", *_IMPLIED}


# -- rendering cssselect's tree as CSS for lexbor ----------------------------------------------


def _render_chain(chain: list[Any], *, quirks: bool) -> str:
    out = [_render(chain[0], quirks)]
    for combinator, compound in zip(chain[1::2], chain[2::2], strict=True):
        out.append(" " if combinator == " " else f" {combinator} ")
        out.append(_render(compound, quirks))
    return "".join(out)


def _render(node: Any, quirks: bool) -> str:
    """CSS text for a compound; the universal selector is dropped where it is implied."""
    text = _render_any(node, quirks)
    return text[1:] if len(text) > 1 and text[0] == "*" and text[1] in ".#[:" else text


def _render_any(node: Any, quirks: bool) -> str:
    if isinstance(node, Element):
        return _ident(node.element.lower()) if node.element else "*"
    base = _render_any(node.selector, quirks) if hasattr(node, "selector") else ""
    if isinstance(node, CombinedSelector):
        right = _render(node.subselector, quirks)
        return f"{base} {right}" if node.combinator == " " else f"{base} {node.combinator} {right}"
    if isinstance(node, Class):
        if quirks:
            return f"{base}[class~={_string(node.class_name)} s]"
        return f"{base}.{_ident(node.class_name)}"
    if isinstance(node, Hash):
        return f"{base}[id={_string(node.id)} s]" if quirks else f"{base}#{_ident(node.id)}"
    if isinstance(node, Attrib):
        name = _ident(node.attrib.lower())
        if node.operator == "exists":
            return f"{base}[{name}]"
        flag = getattr(node, "flag", None) or "s"  # cssselect compares case-sensitively
        value = "" if node.value is None else str(node.value.value)
        return f"{base}[{name}{node.operator}{_string(value)} {flag}]"
    if isinstance(node, Pseudo):
        return f"{base}:{node.ident}"
    if isinstance(node, Function):
        return f"{base}:{node.name}({''.join(str(t.value) for t in node.arguments)})"
    if isinstance(node, Negation):
        return f"{base}:not({_render(node.subselector, quirks)})"
    if isinstance(node, Matching | SpecificityAdjustment):
        name = "is" if isinstance(node, Matching) else "where"
        inner = ", ".join(_render(s, quirks) for s in node.selector_list)
        return f"{base}:{name}({inner})"
    if isinstance(node, Relation):
        args = ", ".join(
            f"{'' if c.value == ' ' else f'{c.value} '}{_render(s.parsed_tree, quirks)}"
            for c, s in node.arguments
        )
        return f"{base}:has({args})"
    raise AssertionError(f"not rendered for lexbor: {node!r}")  # _lexbor_agrees said no


def _ident(name: str) -> str:
    """``name`` as a CSS identifier, escaped where needed."""
    out = []
    for i, ch in enumerate(name):
        if ch.isascii() and not (ch.isalnum() or ch in "-_"):
            out.append(f"\\{ord(ch):x} " if ord(ch) < 0x20 or ord(ch) == 0x7F else f"\\{ch}")
        elif ch in "0123456789" and (i == 0 or (i == 1 and name[0] == "-")):
            out.append(f"\\{ord(ch):x} ")
        else:
            out.append(ch)
    return "".join(out)


def _string(value: str) -> str:
    """``value`` as a double-quoted CSS string."""
    out = []
    for ch in value:
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\{ord(ch):x} ")
        else:
            out.append(f"\\{ch}" if ch in '"\\' else ch)
    return '"' + "".join(out) + '"'
