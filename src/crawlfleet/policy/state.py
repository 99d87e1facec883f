"""State that the store keeps fleet-wide: frozen dataclasses whose fields are JSON scalars.

:func:`to_json` and :func:`from_json` turn one into a ``dict`` and back, refusing a dict with
missing, unknown or mistyped keys (a store row written by another version must not be read as
something it is not).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum
from typing import Any, TypeVar, get_args, get_type_hints

__all__ = ["JsonScalar", "from_json", "to_json"]

JsonScalar = str | int | float | bool | None
T = TypeVar("T")

_SCALARS = (str, int, float, bool, type(None))


def to_json(state: Any) -> dict[str, JsonScalar]:
    """The fields of dataclass ``state`` as a dict (enum values as their strings)."""
    out: dict[str, JsonScalar] = {}
    for f in dataclasses.fields(state):
        value = getattr(state, f.name)
        out[f.name] = value.value if isinstance(value, Enum) else value
    return out


_Fields = tuple[frozenset[str], tuple[tuple[str, Any, Any], ...]]
_FIELDS: dict[type[Any], _Fields] = {}


def _fields(cls: type[Any]) -> _Fields:
    """The field names of dataclass ``cls``, and for each in order: its type hint and the types
    a value of it may have (an Enum class, or a tuple of types). Read once per class: resolving
    the hints of a module with postponed annotations costs more than the rest of a
    :func:`from_json`, and the store reads such states in every report."""
    known = _FIELDS.get(cls)
    if known is not None:
        return known
    hints = get_type_hints(cls)
    fields = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        enum = isinstance(hint, type) and issubclass(hint, Enum)
        fields.append((f.name, hint, hint if enum else (get_args(hint) or (hint,))))
    found = _FIELDS[cls] = (frozenset(name for name, _, _ in fields), tuple(fields))
    return found


def from_json(cls: type[T], data: Mapping[str, Any]) -> T:
    """An instance of dataclass ``cls`` from :func:`to_json`'s output; ``ValueError`` if the
    keys or value types do not match the fields."""
    known, fields = _fields(cls)
    if data.keys() != known:
        unknown = set(data) - known
        missing = known - set(data)
        raise ValueError(
            f"{cls.__name__}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}"
        )
    values: dict[str, Any] = {}
    for name, hint, accepted in fields:
        value = data[name]
        if not isinstance(value, _SCALARS):
            raise ValueError(f"{cls.__name__}.{name}: {type(value).__name__} is not a scalar")
        values[name] = _coerce(cls.__name__, name, hint, accepted, value)
    return cls(**values)


def _coerce(owner: str, name: str, hint: Any, accepted: Any, value: JsonScalar) -> Any:
    if not isinstance(accepted, tuple):
        return accepted(value)  # an Enum: ValueError for an unknown member
    if isinstance(value, bool):
        ok = bool in accepted
    elif isinstance(value, int) and float in accepted and int not in accepted:
        return float(value)  # JSON does not keep 2.0 apart from 2
    else:
        ok = isinstance(value, accepted)
    if not ok:
        raise ValueError(f"{owner}.{name}: {value!r} does not fit {hint}")
    return value
