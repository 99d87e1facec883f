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


def from_json(cls: type[T], data: Mapping[str, Any]) -> T:
    """An instance of dataclass ``cls`` from :func:`to_json`'s output; ``ValueError`` if the
    keys or value types do not match the fields."""
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = set(data) - set(names)
    missing = set(names) - set(data)
    if unknown or missing:
        raise ValueError(
            f"{cls.__name__}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}"
        )
    values: dict[str, Any] = {}
    for name in names:
        value = data[name]
        if not isinstance(value, _SCALARS):
            raise ValueError(f"{cls.__name__}.{name}: {type(value).__name__} is not a scalar")
        values[name] = _coerce(cls.__name__, name, hints[name], value)
    return cls(**values)


def _coerce(owner: str, name: str, hint: Any, value: JsonScalar) -> Any:
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)  # ValueError for an unknown member
    accepted = get_args(hint) or (hint,)
    if isinstance(value, bool):
        ok = bool in accepted
    elif isinstance(value, int) and float in accepted and int not in accepted:
        return float(value)  # JSON does not keep 2.0 apart from 2
    else:
        ok = isinstance(value, accepted)
    if not ok:
        raise ValueError(f"{owner}.{name}: {value!r} does not fit {hint}")
    return value
