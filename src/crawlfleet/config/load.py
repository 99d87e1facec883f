"""Reading the settings: ``crawlfleet.toml`` (or ``--config``), then ``CRAWLFLEET_*``
environment variables, then the caller's overrides (flags, ``-s``)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from crawlfleet.config.keys import SECTIONS, check_queue, convert, known_keys, nearest, section_keys
from crawlfleet.config.sections import RoutesSettings, SinkSettings
from crawlfleet.config.settings import Settings
from crawlfleet.errors import ConfigError
from crawlfleet.model import DomainLimits

__all__ = ["ENV", "load_settings"]

ENV: Final = {
    "CRAWLFLEET_QUEUE": "queue",
    "CRAWLFLEET_RAW": "store.raw",
    "CRAWLFLEET_S3_ENDPOINT": "store.s3_endpoint",
    "CRAWLFLEET_RAW_SPOOL": "store.raw_spool",
    "CRAWLFLEET_CONCURRENCY": "worker.concurrency",
    "CRAWLFLEET_LEASE_TTL": "worker.lease_ttl",
    "CRAWLFLEET_FETCH_TIMEOUT": "worker.fetch_timeout",
    "CRAWLFLEET_CONTROL_TOKEN": "control.token",
    "CRAWLFLEET_NOTIFY_WEBHOOK": "notify.webhook",
    "CRAWLFLEET_NOTIFY_SECRET": "notify.secret",
}


# -- the file -------------------------------------------------------------------------------------


def _from_toml(data: Mapping[str, Any], where: str, base_dir: Path) -> Settings:
    settings = Settings()
    for key, value in data.items():
        if key == "queue":
            settings = replace(settings, queue=check_queue(value))
        elif key in SECTIONS:
            section = _table(key, value, where)
            settings = replace(settings, **{key: _section(key, section, where)})
        elif key == "domains":
            domains = {d: _domain_limits(d, v, where) for d, v in _table(key, value, where).items()}
            settings = replace(settings, domains=domains)
        elif key == "routes":
            from crawlfleet.routes.pools import parse_routes

            pools = parse_routes(data, where=where, base_dir=base_dir)
            settings = replace(settings, routes=RoutesSettings(dict(value), pools))
        elif key == "sink":
            settings = replace(settings, sinks=_sinks(value, where))
        else:
            _unknown_top(key, value, where)
    return settings


_SINK_KEYS: Final = ("kind", "url", "secret", "batch", "name")


def _sinks(value: Any, where: str) -> tuple[SinkSettings, ...]:
    """``[[sink]]`` tables: where each run's changed records go (see SinkSettings)."""
    tables = [value] if isinstance(value, Mapping) else value
    if not isinstance(tables, list) or not all(isinstance(t, Mapping) for t in tables):
        raise ConfigError(f"{where}: [[sink]] must be tables")
    out = []
    for n, table in enumerate(tables, 1):
        for key in table:
            if key not in _SINK_KEYS:
                hint = nearest(key, _SINK_KEYS)
                raise ConfigError(f"{where}: unknown key sink.{key}{hint}")
        values = {
            k: convert(SinkSettings, k, v, f"{where}: sink.{k}", parse=False)
            for k, v in table.items()
        }
        try:
            out.append(SinkSettings(**values))
        except ValueError as exc:
            raise ConfigError(f"{where}: [[sink]] {n}: {exc}") from None
    names = [s.name for s in out if s.name]
    if len(names) != len(set(names)):
        raise ConfigError(f"{where}: two [[sink]] tables have the same name")
    return tuple(out)


def _unknown_top(key: str, value: Any, where: str) -> None:
    if isinstance(value, Mapping) or (isinstance(value, list) and value):
        tables = [*SECTIONS, "domains", "routes", "sink"]
        hint = nearest(key, tables)
        raise ConfigError(f"{where}: unknown section [{key}]{hint}")
    hint = nearest(key, ["queue"]) or nearest(key, known_keys())
    raise ConfigError(f"{where}: unknown key {key!r}{hint}")


def _table(name: str, value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: [{name}] must be a table")
    return value


def _section(name: str, table: Mapping[str, Any], where: str) -> Any:
    cls = SECTIONS[name]
    keys = section_keys(name)
    values = {}
    for key, value in table.items():
        if key not in keys:
            hint = nearest(key, keys)
            hint = hint.replace("'", f"'{name}.", 1) if hint else ""
            raise ConfigError(f"{where}: unknown key {name}.{key}{hint}")
        values[key] = convert(cls, key, value, f"{where}: {name}.{key}", parse=False)
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:  # a section's own checks (PacingConfig's ranges)
        raise ConfigError(f"{where}: [{name}]: {exc}") from None


def _domain_limits(domain: str, value: Any, where: str) -> DomainLimits:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: [domains.{domain!r}] must be a table")
    unknown = sorted(set(value) - {"concurrency", "rate"})
    if unknown:
        hint = nearest(unknown[0], ["concurrency", "rate"])
        raise ConfigError(f"{where}: unknown key domains.{domain!r}.{unknown[0]}{hint}")
    try:
        rate = value.get("rate")
        return DomainLimits(
            max_in_flight=int(value.get("concurrency", 8)),
            min_delay=1.0 / float(rate) if rate else 0.0,
        )
    except (TypeError, ValueError, ZeroDivisionError):
        raise ConfigError(f"{where}: bad limits for domain {domain!r}") from None


def load_settings(
    config: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Build the settings from the config file (``config`` or ./crawlfleet.toml if present),
    the environment and ``overrides`` (see :meth:`Settings.with_overrides`)."""
    path = Path(config) if config else Path("crawlfleet.toml")
    if config and not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    settings = Settings()
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        settings = _from_toml(data, str(path), path.parent)
    env = {key: os.environ[name] for name, key in ENV.items() if os.environ.get(name)}
    return settings.with_overrides(env).with_overrides(overrides or {})
