"""Validation of what a spider yields: a keyed, JSON-ready record, or a quarantine entry.

::

    validator = RecordValidator(Shop.item, Shop.item_key)
    match validator.check(obj, page_url=canonical_url, position=n):
        case Valid(key, data): ...       # a RecordRow
        case Invalid(data, errors): ...  # a QuarantineRow, never a record

The record key is what makes a refetch update rather than duplicate: the ``item_key`` fields'
values when the spider declares them, else the canonical page URL and the record's position on
that page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

__all__ = ["Invalid", "RecordValidator", "Valid", "invalid_from_exception"]


@dataclass(frozen=True, slots=True)
class Valid:
    """A record that passed: its key and its data, JSON-ready (``model_dump(mode="json")``)."""

    key: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Invalid:
    """A record that failed: its data (JSON-safe, best effort) and pydantic-style errors."""

    data: Any
    errors: list[dict[str, Any]]


class RecordValidator:
    """Check records against a spider's ``item`` model and build their keys from ``item_key``.

    With no model, any dict or pydantic model is accepted as it is (made JSON-safe).
    """

    def __init__(
        self, model: type[BaseModel] | None, item_key: str | tuple[str, ...] | None
    ) -> None:
        self.model = model
        if item_key is not None and not (
            isinstance(item_key, str)
            or (isinstance(item_key, tuple | list) and all(isinstance(n, str) for n in item_key))
        ):
            raise ValueError(f"item_key must be a field name or a tuple of them, not {item_key!r}")
        self.key_fields: tuple[str, ...] | None = (
            (item_key,) if isinstance(item_key, str) else tuple(item_key) if item_key else None
        )
        # A typo in item_key would quarantine every record: refuse it up front.
        for name in self.key_fields or ():
            if model is not None and name not in model.model_fields:
                raise ValueError(f"item_key field {name!r} is not a field of {model.__name__}")

    def check(self, obj: Any, *, page_url: str, position: int) -> Valid | Invalid:
        """Validate ``obj`` (a dict or a model instance) yielded at ``position`` on ``page_url``.

        ``page_url`` must be canonical: it makes the key of records without an ``item_key``.
        """
        data = self._validate(obj)
        if isinstance(data, Invalid):
            return data
        if self.key_fields is None:
            return Valid(f"{page_url}#{position}", data)
        key = _key(data, self.key_fields)
        if isinstance(key, Invalid):
            return key
        return Valid(key, data)

    def _validate(self, obj: Any) -> dict[str, Any] | Invalid:
        if not isinstance(obj, dict | BaseModel):
            return _not_a_record(obj)
        try:
            if self.model is None:
                return _as_json(obj)
            if isinstance(obj, self.model):
                instance = obj
            elif isinstance(obj, BaseModel):
                # Another model class: its fields must satisfy ours, by name.
                instance = self.model.model_validate(obj.model_dump())
            else:
                instance = self.model.model_validate(obj)
            return instance.model_dump(mode="json")
        except ValidationError as exc:
            return invalid_from_exception(exc, data=obj)
        except PydanticSerializationError as exc:
            error: dict[str, Any] = {"type": "serialization_error", "loc": [], "msg": str(exc)}
            return Invalid(_json_safe(obj), [error])


def invalid_from_exception(exc: ValidationError, *, data: Any = None) -> Invalid:
    """The quarantine entry for a pydantic error, e.g. a spider that raised building its model.

    ``data`` is what failed, if the caller has it; errors keep their ``input``, JSON-safe.
    """
    errors: list[dict[str, Any]] = json.loads(exc.json(include_url=False))
    return Invalid(_json_safe(data), errors)


def _as_json(obj: dict[Any, Any] | BaseModel) -> dict[str, Any]:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    data = to_jsonable_python(obj)
    assert isinstance(data, dict)
    return data


def _key(data: dict[str, Any], fields: tuple[str, ...]) -> str | Invalid:
    """The record key: a lone field's value, or a JSON array of several (unambiguous)."""
    values = []
    for name in fields:
        value = data.get(name)
        if value is None or value == "":
            state = "missing" if value is None else "empty"
            error = {
                "type": "item_key",
                "loc": [name],
                "msg": f"item_key field {name!r} is {state}",
                "input": value,
            }
            return Invalid(data, [error])
        values.append(value)
    if len(values) == 1 and isinstance(values[0], str):
        return values[0]
    key = values if len(values) > 1 else values[0]
    return json.dumps(key, ensure_ascii=False, separators=(",", ":"))


def _not_a_record(obj: Any) -> Invalid:
    error = {
        "type": "record_type",
        "loc": [],
        "msg": f"a record must be a dict or a pydantic model, not {type(obj).__name__}",
        "input": _json_safe(obj),
    }
    return Invalid(_json_safe(obj), [error])


def _json_safe(obj: Any) -> Any:
    """``obj`` as JSON-ready values, with ``repr`` standing in for what has no JSON form."""
    try:
        return to_jsonable_python(obj, fallback=repr, bytes_mode="base64")
    except (PydanticSerializationError, ValueError, TypeError):
        return repr(obj)
