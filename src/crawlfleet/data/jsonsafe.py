"""What every store and export can take: JSON values with UTF-8 text, finite numbers, no NUL,
bounded nesting. Pure functions, no I/O.

A record that is not such a value is quarantined with the first :func:`problem` found (a named
reason); what goes to quarantine is :func:`repair`-ed first, so a quarantine row can always be
stored and exported. :func:`dumps` writes strict JSON (never a bare ``NaN``) and refuses what a
store would refuse (:class:`Unstorable`), the store's last check before a row is written.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "Problem",
    "Unstorable",
    "dumps",
    "lenient_problem",
    "problem",
    "repair",
    "without_inf_nan",
]

#: deepest nesting of lists and objects a record may have (JSON writers and readers recurse)
MAX_DEPTH = 100
_REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")

#: (error type, location, message), the shape of a pydantic error
Problem = tuple[str, list[str | int], str]


class Unstorable(ValueError):
    """A value no store takes as it is; ``kind`` names why (a quarantine error type)."""

    def __init__(self, kind: str, msg: str) -> None:
        super().__init__(msg)
        self.kind = kind


# JSON's escape of a NUL: "\u0000" after an even number of backslashes (an odd number makes it
# the text "\u0000", an escaped backslash then "u0000")
_ESCAPED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def _has_nul(text: str) -> bool:
    """Whether JSON ``text`` holds a NUL character (not the six characters ``\u0000``)."""
    return _ESCAPED_NUL.search(text) is not None


def _text_problem(text: str) -> tuple[str, str] | None:
    if text.isascii():
        if "\x00" in text:
            return "nul_character", "text holds a NUL character"
        return None
    if "\x00" in text:
        return "nul_character", "text holds a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        return (
            "lone_surrogate",
            f"text holds a lone surrogate {bad!r} (an undecodable byte, e.g. a header read with "
            "surrogateescape)",
        )
    return None


def problem(value: Any, *, allow_inf_nan: bool = False) -> Problem | None:
    """The first reason ``value`` (JSON-ready: dicts, lists, str, numbers, bools, None) is not
    storable as it is, or None. Walks iteratively: no recursion limit to hit."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, loc = stack.pop()
        if isinstance(item, str):
            found = _text_problem(item)
            if found is not None:
                return found[0], loc, found[1]
        elif isinstance(item, float):
            if not allow_inf_nan and not math.isfinite(item):
                return "non_finite_number", loc, f"{item} is not a JSON number"
        elif isinstance(item, dict | list):
            if len(loc) >= MAX_DEPTH:
                return "too_deep", loc[:3], f"nested deeper than {MAX_DEPTH} levels"
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                if isinstance(key, str):
                    found = _text_problem(key)
                    if found is not None:
                        return found[0], [*loc, _REPLACEMENT], found[1]
                stack.append((child, [*loc, key]))
        elif item is not None and not isinstance(item, bool | int):
            return "not_json", loc, f"{type(item).__name__} is not a JSON value"
    return None


def repair(value: Any, _depth: int = 0) -> Any:
    """A storable copy of ``value``: lone surrogates and NULs become U+FFFD, NaN and infinities
    null, anything deeper than :data:`MAX_DEPTH` a marker string, other objects their type name.
    For quarantine rows: what failed stays readable."""
    if isinstance(value, str):
        if _text_problem(value) is None:
            return value
        return _SURROGATE.sub(_REPLACEMENT, value.replace("\x00", _REPLACEMENT))
    if isinstance(value, bool | int) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict | list | tuple):
        if _depth >= MAX_DEPTH:
            return f"<nested deeper than {MAX_DEPTH} levels>"
        if isinstance(value, dict):
            return {repair(str(k)): repair(v, _depth + 1) for k, v in value.items()}
        return [repair(v, _depth + 1) for v in value]
    return f"<{type(value).__name__}>"


def without_inf_nan(value: Any, *, as_strings: bool = False) -> Any:
    """``value`` with NaN and infinities as JSON has them: null, or ``"NaN"`` / ``"Infinity"``
    / ``"-Infinity"`` (``as_strings``, pydantic's ``ser_json_inf_nan="strings"``)."""
    if isinstance(value, float) and not math.isfinite(value):
        if not as_strings:
            return None
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: without_inf_nan(v, as_strings=as_strings) for k, v in value.items()}
    if isinstance(value, list):
        return [without_inf_nan(v, as_strings=as_strings) for v in value]
    return value


def lenient_problem(value: Any) -> str | None:
    """What stops ``value`` from being stored as JSON with ``str`` standing in for the objects
    JSON has no form for (as a request's ``meta`` is): its kind, or None."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
    except ValueError:
        return "non_finite_number"
    except RecursionError:
        return "too_deep"
    if "\\u0000" in text and _has_nul(text):
        return "nul_character"
    found = None if text.isascii() else _text_problem(text)
    return found[0] if found else None


def dumps(value: Any) -> str:
    """Compact strict JSON of ``value``, as a store keeps it; raises :class:`Unstorable` for
    what a store refuses (NaN, NUL, a lone surrogate, nesting past the recursion limit)."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError as exc:
        raise Unstorable("non_finite_number", str(exc)) from None
    except RecursionError:
        raise Unstorable("too_deep", "nested too deep to write as JSON") from None
    except TypeError as exc:
        raise Unstorable("not_json", str(exc)) from None
    if "\\u0000" in text and _has_nul(text):
        raise Unstorable("nul_character", "text holds a NUL character")
    if not text.isascii():
        found = _text_problem(text)
        if found is not None:
            raise Unstorable(*found)
    return text
