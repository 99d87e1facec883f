"""Named SQL blocks, one file per backend (``-- name: block`` headers, procrastinate style)."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@cache
def queries(backend: str) -> dict[str, str]:
    """Return ``{name: sql}`` for ``sql/<backend>.sql``."""
    text = files(__package__).joinpath(f"{backend}.sql").read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}
