"""What changed in a record between two versions, and the rows ``export --changes`` writes.

A record's version is its fields as stored (JSON values). Two versions are compared field by
field at the top level: a field whose value differs (a nested object or list as a whole), that
appeared or that went is *changed*; its old value is kept (``None`` for a field that is new).
The store compares versions by :func:`record_hash`, a digest of the fields in canonical form:
the same values give the same hash whatever the order a spider yields its fields in.

``export --changes`` writes, for each record new, changed or removed in the runs asked for, its
fields (a removed record's last values) plus:

* ``_change``: ``new``, ``changed`` or ``removed``;
* ``_changed_fields``: for ``changed``, the names of the fields that changed, in order;
* ``_previous``: for ``changed``, the old values of those fields (an object).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "CHANGE_COLUMNS",
    "ChangeRow",
    "RecordStatus",
    "changed_fields",
    "record_hash",
]

#: the columns ``export --changes`` adds after a record's own fields
CHANGE_COLUMNS = ("_change", "_changed_fields", "_previous")


class RecordStatus(StrEnum):
    """A record's status in the latest run that saw it (or removed it)."""

    NEW = "new"
    CHANGED = "changed"
    UNCHANGED = "unchanged"
    REMOVED = "removed"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def record_hash(data: Mapping[str, Any]) -> bytes:
    """A digest of a record's fields in canonical form (key order does not count; ``1`` and
    ``1.0`` differ, as they do in the exported JSON)."""
    return hashlib.blake2b(
        _canonical(dict(data)).encode("utf-8", "surrogatepass"), digest_size=16
    ).digest()


def changed_fields(
    previous: Mapping[str, Any], current: Mapping[str, Any]
) -> tuple[list[str], dict[str, Any]]:
    """The fields that differ between ``previous`` and ``current`` (those of ``current`` in its
    order, then those only ``previous`` had), and their old values (``None`` for a field
    ``previous`` did not have)."""
    names: list[str] = []
    old: dict[str, Any] = {}
    for name, value in current.items():
        if name not in previous:
            names.append(name)
            old[name] = None
        elif _canonical(previous[name]) != _canonical(value):
            names.append(name)
            old[name] = previous[name]
    for name, value in previous.items():
        if name not in current:
            names.append(name)
            old[name] = value
    return names, old


@dataclass(frozen=True, slots=True)
class ChangeRow:
    """One row of ``export --changes``: the record's fields (a removed one's last values) and
    how it changed. ``previous`` is the version before the runs asked for (None for a new
    record); a changed record whose fields came back to that version is no change at all."""

    key: str
    data: Mapping[str, Any]
    change: RecordStatus
    previous: Mapping[str, Any] | None = None

    def columns(self) -> dict[str, Any] | None:
        """The row's columns, or None when there is nothing to say (changed back)."""
        row = dict(self.data)
        if self.change is RecordStatus.CHANGED:
            names, old = changed_fields(self.previous or {}, self.data)
            if not names:
                return None
            row.update(_change="changed", _changed_fields=names, _previous=old)
            return row
        row.update(_change=self.change.value, _changed_fields=None, _previous=None)
        return row
