"""A run's data profile: what its records look like, field by field. Pure.

For each field of the spider's model (or, without one, each field the records have):

* **coverage**: the share of the run's records where the field is present and not empty
  (``None``, ``""`` or only spaces, tabs and line ends, ``[]`` and ``{}`` are empty; ``0``
  and ``false`` are not);
* for text values, the **share of distinct values** among the filled ones (1.0: every record
  has its own; a share that falls tells of a default or a placeholder filling the field);
* for numbers, **min / median / max** (the median of an even count is the mean of the middle
  two);
* how many filled values are text and how many numbers (a field that was always a number and
  is now text shows here).

The store computes the same :class:`FieldStats` in SQL over a run's records (one pass for every
field; ``frontier/sql``); :func:`field_stats` is their definition, over records in memory, and
the contract suite checks the two agree. :func:`build_profile` turns the counts into a
:class:`RunProfile`, kept per run in the store and compared with earlier runs by the monitors
(:mod:`crawlfleet.monitor.quality`).
"""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from decimal import Decimal
from enum import Enum
from typing import Any, Final, Literal

__all__ = [
    "FieldProfile",
    "FieldStats",
    "RunProfile",
    "build_profile",
    "field_kinds",
    "field_stats",
    "is_filled",
]

#: what a blank text is made of (the store's SQL trims the same characters)
BLANK: Final = " \t\n\r"
Kind = Literal["text", "number", "bool", "other"]
#: fields a profile keeps at most (a model with more, or dict records with ever new keys, keeps
#: the first ones by name: a profile and /metrics stay bounded)
MAX_FIELDS: Final = 200


def is_filled(value: Any) -> bool:
    """Whether a field's value counts towards its coverage."""
    if value is None:
        return False
    if isinstance(value, str):
        return value.strip(BLANK) != ""
    if isinstance(value, list | tuple | dict):
        return len(value) > 0
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True, slots=True)
class FieldStats:
    """Counts of one field over a run's records: ``present`` (the key is there, even null),
    ``filled`` (not empty), filled ``texts`` and their ``distinct`` values, ``numbers`` and
    their min / median / max."""

    name: str
    present: int = 0
    filled: int = 0
    texts: int = 0
    distinct: int = 0
    numbers: int = 0
    minimum: float | None = None
    median: float | None = None
    maximum: float | None = None


def field_stats(records: Iterable[Mapping[str, Any]]) -> dict[str, FieldStats]:
    """The counts of every top-level field of ``records``, by name (what the store's SQL gives)."""
    acc: dict[str, dict[str, Any]] = {}
    for record in records:
        for name, value in record.items():
            a = acc.setdefault(name, {"present": 0, "filled": 0, "texts": set(), "nt": 0, "n": []})
            a["present"] += 1
            if not is_filled(value):
                continue
            a["filled"] += 1
            if isinstance(value, str):
                a["nt"] += 1
                a["texts"].add(value)
            elif _is_number(value):
                a["n"].append(float(value))
    out = {}
    for name, a in acc.items():
        numbers = sorted(a["n"])
        out[name] = FieldStats(
            name,
            a["present"],
            a["filled"],
            a["nt"],
            len(a["texts"]),
            len(numbers),
            numbers[0] if numbers else None,
            _median(numbers),
            numbers[-1] if numbers else None,
        )
    return out


def _median(ordered: list[float]) -> float | None:
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclass(frozen=True, slots=True)
class FieldProfile:
    """One field of a run's profile (see the module's docstring)."""

    name: str
    kind: str  # what the model says (text, number, bool, other), or what the values are
    coverage: float  # filled records / records (0 when the run has none)
    filled: int = 0
    distinct_share: float | None = None  # distinct texts / filled texts
    text_share: float | None = None  # filled values that are text
    number_share: float | None = None  # filled values that are numbers
    minimum: float | None = None
    median: float | None = None
    maximum: float | None = None


@dataclass(frozen=True)
class RunProfile:
    """What one run of a job produced and how it went: records (valid, stored), quarantined by
    reason, pages fetched, requests given up, attempts blocked, retries, and its fields.
    ``final``: the run had finished when this was computed (else it is a check while it went)."""

    job: str
    run: int
    at: float
    started_at: float
    finished_at: float | None = None
    final: bool = False
    records: int = 0
    quarantined: int = 0
    quarantine_by_reason: Mapping[str, int] = field(default_factory=dict)
    pages: int = 0  # requests done (fetched, final answers too)
    dead: int = 0  # requests given up
    blocked: int = 0  # attempts answered with a block
    retries: int = 0  # attempts past the first, over finished requests
    fields: Mapping[str, FieldProfile] = field(default_factory=dict)

    @property
    def yielded(self) -> int:
        return self.records + self.quarantined

    @property
    def validation_failure_ratio(self) -> float | None:
        return self.quarantined / self.yielded if self.yielded else None

    @property
    def finished_requests(self) -> int:
        return self.pages + self.dead

    @property
    def dead_ratio(self) -> float | None:
        return self.dead / self.finished_requests if self.finished_requests else None

    @property
    def block_ratio(self) -> float | None:
        attempts = self.pages + self.blocked
        return self.blocked / attempts if attempts else None

    @property
    def retry_depth(self) -> float | None:
        return self.retries / self.finished_requests if self.finished_requests else None

    @property
    def duration(self) -> float:
        return (self.finished_at if self.finished_at is not None else self.at) - self.started_at

    def coverage(self, name: str) -> float | None:
        f = self.fields.get(name)
        return None if f is None else f.coverage

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["fields"] = {name: asdict(f) for name, f in self.fields.items()}
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunProfile:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        field_names = {f.name for f in fields(FieldProfile)}
        values["fields"] = {
            name: FieldProfile(**{k: v for k, v in f.items() if k in field_names})
            for name, f in (data.get("fields") or {}).items()
        }
        values["quarantine_by_reason"] = dict(data.get("quarantine_by_reason") or {})
        return cls(**values)


def build_profile(
    base: RunProfile, stats: Mapping[str, FieldStats], kinds: Mapping[str, str] | None = None
) -> RunProfile:
    """``base`` (its counts set, no fields) with the fields of ``stats``: those of the model
    (``kinds``, every one of them, coverage 0 where no record has it) or, without a model, those
    the records have; at most :data:`MAX_FIELDS`, by name."""
    names = list(kinds) if kinds else sorted(stats)
    profiled = {}
    for name in sorted(names)[:MAX_FIELDS]:
        s = stats.get(name, FieldStats(name))
        kind = (kinds or {}).get(name) or _kind_found(s)
        profiled[name] = FieldProfile(
            name=name,
            kind=kind,
            coverage=s.filled / base.records if base.records else 0.0,
            filled=s.filled,
            distinct_share=s.distinct / s.texts if s.texts else None,
            text_share=s.texts / s.filled if s.filled else None,
            number_share=s.numbers / s.filled if s.filled else None,
            minimum=s.minimum,
            median=s.median,
            maximum=s.maximum,
        )
    return _with_fields(base, profiled)


def _with_fields(base: RunProfile, profiled: Mapping[str, FieldProfile]) -> RunProfile:
    from dataclasses import replace

    return replace(base, fields=profiled)


def _kind_found(s: FieldStats) -> str:
    if s.filled and s.numbers >= s.filled / 2:
        return "number"
    if s.filled and s.texts >= s.filled / 2:
        return "text"
    return "other"


def field_kinds(model: Any) -> dict[str, str]:
    """The fields of a pydantic model and what each holds (text, number, bool, other), by the
    name a record carries it under (its alias when the model dumps by alias: never here)."""
    if model is None or not hasattr(model, "model_fields"):
        return {}
    return {name: _kind_of(info.annotation) for name, info in model.model_fields.items()}


def _kind_of(annotation: Any) -> str:
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Union or isinstance(annotation, types.UnionType):
        kinds = {_kind_of(a) for a in args if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else "other"
    if origin is typing.Annotated:
        return _kind_of(args[0])
    if origin is Literal:
        values = set(args)
        if all(isinstance(v, str) for v in values):
            return "text"
        return "number" if all(_is_number(v) for v in values) else "other"
    if annotation is bool:
        return "bool"
    if annotation in (int, float, Decimal):
        return "number"
    if annotation is str:
        return "text"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "text" if issubclass(annotation, str) else "other"
    return "other"
