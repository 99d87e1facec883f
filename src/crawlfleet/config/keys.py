"""The names of the settings (``section.key``, unambiguous bare keys), their nearest-name
errors, and the conversion of a value to a key's type (strings from flags, the environment and
``-s``; typed values from the file and ``custom_settings``)."""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import fields
from functools import cache
from typing import Any, Final

from crawlfleet.config.sections import (
    BrowserSection,
    ControlSettings,
    FetchSection,
    NotifySettings,
    PacingSettings,
    QualitySettings,
    RetrySettings,
    StoreSettings,
    TrapSettings,
    WorkerSettings,
)
from crawlfleet.errors import ConfigError

__all__ = [
    "JOB_SECTIONS",
    "SECTIONS",
    "check_queue",
    "convert",
    "known_keys",
    "nearest",
    "resolve_key",
    "section_keys",
]

#: the sections set by ``[name]`` tables and overrides, with the keys a file may set
SECTIONS: Final[dict[str, type]] = {
    "store": StoreSettings,
    "worker": WorkerSettings,
    "retry": RetrySettings,
    "pacing": PacingSettings,
    "traps": TrapSettings,
    "control": ControlSettings,
    "browser": BrowserSection,
    "quality": QualitySettings,
    "notify": NotifySettings,
    "fetch": FetchSection,
}
#: fields of a section that are not settings (the pacing limits come from each domain's row)
NOT_KEYS: Final = {"pacing": {"min_delay", "max_concurrency"}}
#: sections a spider's ``custom_settings`` (and a job's ``-s``) may change for its own job
JOB_SECTIONS: Final = frozenset({"store", "worker", "retry", "fetch", "quality"})


# -- keys -----------------------------------------------------------------------------------------


def section_keys(section: str) -> list[str]:
    """The keys ``[section]`` may set."""
    skip = NOT_KEYS.get(section, set())
    return [f.name for f in fields(SECTIONS[section]) if f.name not in skip]


@cache
def _key_table() -> dict[str, tuple[str, str]]:
    """Every accepted override key: ``section.key``, unambiguous bare names, and the flat
    ``retry_base`` / ``retry_cap`` of earlier versions."""
    table: dict[str, tuple[str, str]] = {}
    bare: dict[str, list[tuple[str, str]]] = {}
    for section in SECTIONS:
        for name in section_keys(section):
            table[f"{section}.{name}"] = (section, name)
            bare.setdefault(name, []).append((section, name))
    for name, places in bare.items():
        if len(places) == 1:
            table.setdefault(name, places[0])
    table["retry_base"], table["retry_cap"] = ("retry", "base"), ("retry", "cap")
    return table


def known_keys() -> list[str]:
    """Every key :meth:`Settings.with_overrides` accepts."""
    return ["queue", *_key_table()]


def resolve_key(key: str) -> tuple[str, str]:
    """``(section, field)`` of an override key; ConfigError naming the nearest key if unknown."""
    found = _key_table().get(key)
    if found is None:
        raise ConfigError(f"unknown setting {key!r}{nearest(key, known_keys())}")
    return found


def nearest(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``choices``, or ``""`` when none is close."""
    pool = list(choices)
    match = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not match:  # a bare name of a dotted key ("concurency" -> "worker.concurrency")
        tails = {c.rpartition(".")[2]: c for c in pool}
        close = difflib.get_close_matches(word.rpartition(".")[2], list(tails), n=1, cutoff=0.6)
        match = [tails[close[0]]] if close else []
    return f" (did you mean {match[0]!r}?)" if match else ""


def check_queue(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError("queue must be a URL string")
    return value


# -- values ---------------------------------------------------------------------------------------

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})
_NONE: Final = frozenset({"none", "off", "false", "no"})


@cache
def _types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def convert(cls: type, name: str, value: Any, label: str, *, parse: bool = True) -> Any:
    """``value`` as the type of ``cls.name``: strings are parsed (flags, environment, -s) unless
    ``parse`` is False; anything else must already have the type (a file's values)."""
    kind = _types(cls)[name]
    origin = typing.get_origin(kind)
    if origin is tuple:
        return _strings(value, label)
    if origin in (Mapping, dict):
        return _shares(value, label)
    optional = isinstance(kind, types.UnionType) and type(None) in typing.get_args(kind)
    if optional:
        kind = next(t for t in typing.get_args(kind) if t is not type(None))
        if value is False or (isinstance(value, str) and value.lower() in _NONE):
            return None
    try:
        if parse and isinstance(value, str) and kind is not str:
            return _parse(kind, value)
        return _typed(kind, value)
    except (TypeError, ValueError):
        what = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
        off = " (or false: no limit)" if optional else ""
        raise ConfigError(f"{label} must be {what.get(kind, kind)}{off}, not {value!r}") from None


def _strings(value: Any, label: str) -> tuple[str, ...]:
    """A list of strings (or one string: a list of one; ``-s`` and the environment give one)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(v, str) for v in items):
        raise ConfigError(f"{label} must be a string or a list of strings, not {value!r}")
    return tuple(v for v in items if v)


def _shares(value: Any, label: str) -> dict[str, float]:
    """A table of names to shares: ``{price = 1.0}``, or ``"price=1.0,rating=0.9"`` from -s."""
    if isinstance(value, str):
        pairs = [p.partition("=") for p in value.split(",") if p.strip()]
        if any(not sep for _, sep, _ in pairs):
            raise ConfigError(f"{label} must be NAME=SHARE pairs, not {value!r}")
        value = {k.strip(): v.strip() for k, _, v in pairs}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{label} must be a table of field = share, not {value!r}")
    out = {}
    for key, share in value.items():
        try:
            if isinstance(share, bool):
                raise ValueError(share)
            out[str(key)] = float(share)
        except (TypeError, ValueError):
            raise ConfigError(
                f"{label}.{key} must be a number from 0 to 1, not {share!r}"
            ) from None
    return out


def _parse(kind: Any, text: str) -> Any:
    if kind is bool:
        if text.lower() not in _TRUE | _FALSE:
            raise ValueError(text)
        return text.lower() in _TRUE
    return kind(text.replace("_", "")) if kind is int else kind(text)


def _typed(kind: Any, value: Any) -> Any:
    if isinstance(value, bool) and kind is not bool:
        raise TypeError(value)
    if kind is float and isinstance(value, int):
        return float(value)
    if not isinstance(value, kind):
        raise TypeError(value)
    return value
