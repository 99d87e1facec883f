"""A response's ``Content-Type`` as the Fetch standard reads it: pure, no I/O.

A server may send the header twice (or one header with a list); browsers and Scrapy take the
last valid type, not the first: the Fetch standard's "extract a MIME type" reads every value
in order, and a later type replaces an earlier one, keeping the earlier ``charset`` only when the
later one is the same type and names none. :func:`content_type` gives that result, serialised
as ``type/subtype`` plus its ``charset``, for the decoder and the HTML tests alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

__all__ = ["content_type", "extract_mime_type"]

_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _values(headers: Mapping[str, str]) -> list[str]:
    getall = getattr(headers, "getall", None)  # multidicts keep every header of the name
    if getall is not None:
        found: list[str] = list(getall("content-type", []))
        return found
    value = headers.get("content-type")
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == "content-type"), None)
    return [] if value is None else [value]


def _split(value: str) -> list[str]:
    """A header value split at the commas outside quoted strings."""
    parts, start, quoted, i = [], 0, False, 0
    while i < len(value):
        char = value[i]
        if char == '"':
            quoted = not quoted
        elif char == "\\" and quoted:
            i += 1
        elif char == "," and not quoted:
            parts.append(value[start:i])
            start = i + 1
        i += 1
    parts.append(value[start:])
    return parts


def _parse(value: str) -> tuple[str, str | None] | None:
    """``(essence, charset)`` of one MIME type, or None if it is not one."""
    kind, _, params = value.strip(" \t\r\n").partition(";")
    main, slash, sub = kind.strip(" \t").partition("/")
    if not slash or not _TOKEN.fullmatch(main) or not _TOKEN.fullmatch(sub):
        return None
    charset = None
    for param in params.split(";"):
        name, eq, raw = param.partition("=")
        if eq and name.strip(" \t").lower() == "charset" and charset is None:
            raw = raw.strip(" \t")
            if raw.startswith('"'):
                raw = raw[1:].partition('"')[0]
            charset = raw or None
    return f"{main}/{sub}".lower(), charset


def extract_mime_type(values: Iterable[str]) -> str | None:
    """The Fetch standard's MIME type of ``Content-Type`` header values (in the order they came),
    as ``type/subtype[; charset=X]``; None when none is a valid type."""
    essence: str | None = None
    charset: str | None = None
    for value in values:
        for part in _split(value):
            parsed = _parse(part)
            if parsed is None or parsed[0] == "*/*":
                continue
            if parsed[0] != essence:
                essence, charset = parsed
            elif parsed[1] is not None:
                charset = parsed[1]
    if essence is None:
        return None
    return f"{essence}; charset={charset}" if charset else essence


def content_type(headers: Mapping[str, str]) -> str | None:
    """The ``Content-Type`` of a response's headers (case-insensitive; a multidict's repeated
    headers all read), per :func:`extract_mime_type`."""
    return extract_mime_type(_values(headers))
