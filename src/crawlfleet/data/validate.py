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
import reprlib
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from crawlfleet.data import jsonsafe
from crawlfleet.data.captures import Provenance
from crawlfleet.errors import SpiderLoadError
from crawlfleet.model import QuarantineRow, RecordRow

__all__ = [
    "Invalid",
    "RecordValidator",
    "Valid",
    "invalid_from_exception",
    "quarantine_row",
    "record_validator",
    "refused_record",
]


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
        config = model.model_config if model is not None else {}
        #: NaN and infinities are refused unless the model says ``allow_inf_nan=True`` itself
        self.allow_inf_nan = config.get("allow_inf_nan") is True
        self.inf_nan_as_strings = config.get("ser_json_inf_nan") == "strings"
        for name in self.key_fields or ():
            if model is not None and name not in model.model_fields:
                raise ValueError(f"item_key field {name!r} is not a field of {model.__name__}")

    def check(self, obj: Any, *, page_url: str, position: int) -> Valid | Invalid:
        """Validate ``obj`` (a dict or a model instance) yielded at ``position`` on ``page_url``.

        ``page_url`` must be canonical: it makes the key of records without an ``item_key``.
        Never raises: whatever ``obj`` holds (bytes, a 5,000-deep dict, a lone surrogate, NaN)
        ends as a Valid record every store can write or an Invalid one with a named reason.
        """
        try:
            data = self._validate(obj)
        except (ValueError, TypeError, RecursionError, UnicodeError) as exc:
            data = _invalid(obj, "invalid_value", _line(exc))
        if isinstance(data, Invalid):
            return data
        found = jsonsafe.problem(data, allow_inf_nan=self.allow_inf_nan)
        if found is not None:
            kind, loc, msg = found
            return Invalid(jsonsafe.repair(data), [{"type": kind, "loc": loc, "msg": msg}])
        if self.allow_inf_nan:
            data = jsonsafe.without_inf_nan(data, as_strings=self.inf_nan_as_strings)
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
            return _invalid(obj, "serialization_error", str(exc))


def invalid_from_exception(exc: ValidationError, *, data: Any = None) -> Invalid:
    """The quarantine entry for a pydantic error, e.g. a spider that raised building its model.

    ``data`` is what failed, if the caller has it; errors keep their ``input``, JSON-safe.
    """
    try:
        errors: list[dict[str, Any]] = json.loads(exc.json(include_url=False))
    except (ValueError, TypeError, RecursionError):  # an input JSON cannot show (bytes, ...)
        errors = [
            {k: _json_safe(v) for k, v in e.items() if k != "url"}
            for e in exc.errors(include_url=False)
        ]
    return Invalid(_json_safe(data), jsonsafe.repair(errors))


def _invalid(obj: Any, kind: str, msg: str) -> Invalid:
    return Invalid(_json_safe(obj), [{"type": kind, "loc": [], "msg": msg}])


def _line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]


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
    """``obj`` as storable JSON values (:func:`jsonsafe.repair`), with a short ``repr`` standing
    in for what has no JSON form."""
    try:
        data = to_jsonable_python(obj, fallback=_short_repr, bytes_mode="base64")
    except (PydanticSerializationError, ValueError, TypeError, RecursionError):
        data = _short_repr(obj)
    return jsonsafe.repair(data)


def _short_repr(obj: Any) -> str:
    return reprlib.repr(obj)  # bounded in depth and length, whatever obj is


def record_validator(spider_cls: type[Any]) -> RecordValidator:
    """The spider class's record checks (``item``, ``item_key``); a bad ``item_key`` is refused with
    one line naming the spider (:class:`~crawlfleet.errors.SpiderLoadError`)."""
    try:
        return RecordValidator(spider_cls.item, spider_cls.item_key)
    except (TypeError, ValueError) as exc:
        raise SpiderLoadError(f"spider {spider_cls.__name__}: {exc}") from None


def quarantine_row(
    invalid: Invalid, page_url: str, fetched_at: float, warc: Provenance
) -> QuarantineRow:
    """The quarantine row of a record that failed its checks on the page at ``page_url``."""
    return QuarantineRow(
        invalid.data,
        invalid.errors,
        page_url,
        fetched_at,
        warc.file,
        warc.record_id,
        warc.refers_to_file,
        warc.refers_to,
    )


def refused_record(r: RecordRow, exc: BaseException) -> QuarantineRow:
    """The quarantine row of a record the store refused (``store_refused``, and why)."""
    kind = getattr(exc, "kind", type(exc).__name__)
    line = (str(exc).strip().splitlines() or [""])[0][:300]
    error = {"type": "store_refused", "loc": [], "msg": f"{kind}: {line}", "input": r.key}
    return QuarantineRow(
        r.data,
        [error],
        r.url,
        r.fetched_at,
        r.warc_file,
        r.warc_record_id,
        r.warc_refers_to_file,
        r.warc_refers_to,
    )
