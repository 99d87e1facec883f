"""The tree drawn in errors.py's docstring is the tree of its classes: every class is drawn,
under its own parent."""

from __future__ import annotations

import inspect
import re

from crawlfleet import errors


def _drawn() -> dict[str, str]:
    """Each class the docstring draws (``├── Name`` / ``└── Name``), and the class drawn above
    it: the one at the nearest smaller column."""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in (errors.__doc__ or "").splitlines():
        found = re.search(r"(?:── |^    )([A-Z][A-Za-z]+)\b", line)
        if found is None:
            continue
        column = found.start(1)
        while stack and stack[-1][0] >= column:
            stack.pop()
        if stack:
            parents[found.group(1)] = stack[-1][1]
        stack.append((column, found.group(1)))
    return parents


def test_every_error_class_is_drawn_under_its_parent() -> None:
    classes = {
        name: cls
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.CrawlfleetError) and cls.__module__ == errors.__name__
    }
    drawn = _drawn()
    assert set(drawn) | {"CrawlfleetError"} == set(classes)
    for name, parent in drawn.items():
        assert classes[parent] in classes[name].__bases__, (name, parent)
