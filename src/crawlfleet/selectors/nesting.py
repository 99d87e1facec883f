"""How deeply a page's elements nest, read off its tags before any parser builds a tree.

HTML parsers pay for depth: lexbor's tree building costs about the depth of the open elements
for every start tag (5,000 nested ``<div>`` parse in 0.06 s, 20,000 in 0.5 s, 100,000 in
seconds), and libxml2 stops building past 2,048 levels, so XPath answers nothing below them.
:func:`measure` walks the tags once, linearly, with the parser's stack rules where they matter
(void elements, elements closed by a sibling of their kind, raw text, comments, an end tag that
closes what it matches), and gives the deepest nesting and the parse work (the sum of the depths
at each start tag). A page past a bound is ``too_complex``: refused before parsing, named, never
a silent empty result.

It is an estimate, not a parser: markup built to fool it can nest deeper than it says (the
worker parses off its event loop with a time budget for that). A page with fewer start tags than
the bound needs no walk at all (counted in C, about a tenth of the walk's cost).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Nesting", "measure", "over"]

#: elements with no end tag
_VOID = frozenset(
    (
        *("area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "img"),
        *("input", "keygen", "link", "meta", "param", "source", "track", "wbr"),
    )
)
#: elements a new one of the same kind closes when it is open just above (p, li, td...)
_SIBLING_CLOSED = frozenset(
    ("p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "a", "rb", "rt", "rp", "nobr")
)
#: what such a closing never reaches past (an ``<li>`` in a nested list closes no outer item)
_BARRIERS = frozenset(
    (
        *("ul", "ol", "dl", "menu", "table", "tbody", "thead", "tfoot", "tr", "td", "th"),
        *("select", "button", "object", "template", "caption"),
    )
)
#: ... except these, for a row (a new ``<tr>`` closes the open cell and row)
_ROW_PASSES = frozenset(("td", "th"))
#: elements whose content is text up to their end tag
_RAW = frozenset(("script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes"))
#: how far below the top a sibling-closed element is looked for (a ``<p>`` inside ``<b><i>``)
_SIBLING_REACH = 4

_VOID_TAG = r"<(?:%s)[\s/>]" % "|".join(sorted(_VOID))  # noqa: UP031 - lowercase: a bound
_VOID_TAG_STR: re.Pattern[str] = re.compile(_VOID_TAG)
_VOID_TAG_BYTES: re.Pattern[bytes] = re.compile(_VOID_TAG.encode())
_TAG = r"<(/?)([A-Za-z][A-Za-z0-9:-]*)"
_TAG_STR: re.Pattern[str] = re.compile(_TAG)
_TAG_BYTES: re.Pattern[bytes] = re.compile(_TAG.encode())
# comments and raw text, dropped before the tags are read; one never closed runs to the end
# (so that the search fails once, not once per later "<!--")
_SKIP = r"<!--(?:.*?-->|.*)|<(%s)\b(?:.*?</\1\s*>|.*)" % "|".join(sorted(_RAW))  # noqa: UP031
_SKIP_STR: re.Pattern[str] = re.compile(_SKIP, re.S | re.I)
_SKIP_BYTES: re.Pattern[bytes] = re.compile(_SKIP.encode(), re.S | re.I)


@dataclass(frozen=True, slots=True)
class Nesting:
    """The deepest nesting of a page's elements and its parse work (sum of start tag depths);
    ``partial`` when the walk stopped at a bound."""

    depth: int
    work: int
    partial: bool = False


def over(markup: str | bytes, max_depth: int, max_work: int) -> str | None:
    """Why ``markup`` is too complex to parse (past ``max_depth`` levels or ``max_work``), or
    None. Cheap for most pages: fewer start tags of elements with content than ``max_depth``
    cannot nest deeper (counted in C: every ``<`` but end tags, comments and void elements,
    each count only when the rougher ones before it do not settle it already)."""
    if _start_tags_at_most(markup, max_depth) <= max_depth:
        return None
    found = measure(markup, max_depth=max_depth, max_work=max_work)
    if found.depth > max_depth:
        return f"elements nested more than {max_depth} levels deep"
    if found.work > max_work:
        return f"nesting too costly to parse ({max_work:,} element-levels and more)"
    return None


def _start_tags_at_most(markup: str | bytes, enough: int = -1) -> int:
    """An upper bound of the start tags of non-void elements in ``markup``; a rougher one (each
    ``<`` but end tags) as soon as that is at most ``enough``."""
    if isinstance(markup, str):
        tags = markup.count("<") - markup.count("</")
        if tags <= enough:
            return tags
        return tags - markup.count("<!") - len(_VOID_TAG_STR.findall(markup))
    tags = markup.count(b"<") - markup.count(b"</")
    if tags <= enough:
        return tags
    return tags - markup.count(b"<!") - len(_VOID_TAG_BYTES.findall(markup))


def measure(markup: str | bytes, *, max_depth: int = 1 << 62, max_work: int = 1 << 62) -> Nesting:
    """The nesting of ``markup``'s elements (stops early past either bound)."""
    skip, tags = (_SKIP_STR, _TAG_STR) if isinstance(markup, str) else (_SKIP_BYTES, _TAG_BYTES)
    plain = skip.sub(markup[:0], markup)  # type: ignore[arg-type]
    found: list[tuple[Any, Any]] = tags.findall(plain)  # type: ignore[arg-type]
    stack = _Stack()
    depth = work = 0
    for slash, raw_name in found:
        name: str = (raw_name if isinstance(raw_name, str) else raw_name.decode()).lower()
        if slash:
            stack.close(name)
            continue
        if name in _VOID:
            continue
        if name in _SIBLING_CLOSED:
            stack.close_sibling(name)
        size = stack.push(name)
        work += size
        depth = max(depth, size)
        if depth > max_depth or work > max_work:
            return Nesting(depth, work, partial=True)
    return Nesting(depth, work)


class _Stack:
    """Open elements, with a count per name: an end tag of nothing open costs nothing."""

    __slots__ = ("names", "open")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.open: dict[str, int] = {}

    def push(self, name: str) -> int:
        self.names.append(name)
        self.open[name] = self.open.get(name, 0) + 1
        return len(self.names)

    def close(self, name: str) -> None:
        """An end tag: pop down to the open ``name``, if there is one."""
        if self.open.get(name):
            self._pop_to(name, len(self.names))

    def close_sibling(self, name: str) -> None:
        """A ``<li>`` (``<p>``, ``<td>``...) closes an open one just above it: within
        :data:`_SIBLING_REACH` of the top and not past a list, table or select."""
        if not self.open.get(name):
            return
        names = self.names
        passes = _ROW_PASSES if name == "tr" else frozenset()
        for i in range(len(names) - 1, max(-1, len(names) - 1 - _SIBLING_REACH), -1):
            if names[i] == name:
                self._pop_to(name, i + 1)
                return
            if names[i] in _BARRIERS and names[i] not in passes:
                return

    def _pop_to(self, name: str, above: int) -> None:
        names = self.names
        for i in range(above - 1, -1, -1):
            if names[i] == name:
                for gone in names[i:]:
                    self.open[gone] -= 1
                del names[i:]
                return
