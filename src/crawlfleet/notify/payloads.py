"""The bodies of the events crawlfleet sends, and how Slack and mail show them.

The JSON of each event is a contract (keys are added, never renamed or removed). Every body
has ``"event"`` (``alert``, ``run_finished``, ``changes``), ``"job"``, ``"run"`` and
``"idempotency_key"`` (also the ``Idempotency-Key`` header: a receiver that saw it already
drops the repeat)::

    {"event": "alert", "alert": "field_coverage", "field": "rating", "severity": "warning",
     "message": "rating: coverage 70.0%, down 30.0 points ...", "value": 0.7, "baseline": 1.0,
     "threshold": 0.1, "examples": [{"kind": "record", "key": ..., "url": ...,
     "warc_file": ..., "warc_record_id": ...}], "job": "shop", "run": 2, "at": ...}
    {"event": "run_finished", "job": "shop", "run": 2, "started_at": ..., "finished_at": ...,
     "summary": {"records": ..., "quarantined": ..., "pages": ..., ...},
     "alerts": ["field_coverage", ...], "profile": {...}}
    {"event": "changes", "job": "shop", "run": 2, "sink": "warehouse", "batch": 1,
     "records": [{"key": ..., "status": "new", "data": {...}, "url": ..., ...}]}

``field`` is there only when the alert is about one; ``baseline`` is null where no earlier run
had the figure. A fleet alert (``worker_local_fault``: a worker's disk full; ``no_worker_alive``,
``oldest_queued_age``) is about no run: ``job`` and ``run`` are null (``oldest_queued_age``
names its job) and ``subject`` says what fires (a worker id, ``fleet``, ``job/domain``)::

    {"event": "alert", "alert": "worker_local_fault", "subject": "host-4711", "job": null,
     "run": null, "severity": "critical", "message": "worker host-4711 stopped leasing: ...",
     "value": 1.0, "baseline": null, "threshold": 0.0, "examples": [], "at": ...}
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from crawlfleet.data.profile import RunProfile
from crawlfleet.monitor.quality import Breach
from crawlfleet.urls import mask_credentials

__all__ = [
    "alert_body",
    "changes_body",
    "dumps",
    "email_text",
    "fleet_alert_body",
    "run_finished_body",
    "slack_body",
]


def dumps(body: Mapping[str, Any]) -> str:
    """A body as it is stored and sent (compact, UTF-8, strict JSON)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def alert_body(
    key: str, job: str, run: int, breach: Breach, examples: Sequence[Mapping[str, Any]], at: float
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "event": "alert",
        "idempotency_key": key,
        "alert": breach.alert,
        "job": job,
        "run": run,
        "severity": breach.severity,
        "message": breach.message,
        "value": breach.value,
        "baseline": breach.baseline,
        "threshold": breach.threshold,
        "examples": [dict(e) for e in examples],
        "at": at,
    }
    if breach.field is not None:
        body["field"] = breach.field
    return body


def fleet_alert_body(
    key: str,
    alert: str,
    subject: str,
    message: str,
    *,
    value: float,
    threshold: float,
    at: float,
    job: str | None = None,
) -> dict[str, Any]:
    """A fleet alert's body (about the fleet, a worker or a queue; no run's quality)."""
    return {
        "event": "alert",
        "idempotency_key": key,
        "alert": alert,
        "subject": subject,
        "job": job,
        "run": None,
        "severity": "critical",
        "message": message,
        "value": value,
        "baseline": None,
        "threshold": threshold,
        "examples": [],
        "at": at,
    }


def summary(p: RunProfile) -> dict[str, Any]:
    return {
        "records": p.records,
        "yielded": p.yielded,
        "quarantined": p.quarantined,
        "quarantine_by_reason": dict(p.quarantine_by_reason),
        "pages": p.pages,
        "dead": p.dead,
        "blocked": p.blocked,
        "retries": p.retries,
        "duration": p.duration,
    }


def run_finished_body(key: str, p: RunProfile, alerts: Sequence[str]) -> dict[str, Any]:
    return {
        "event": "run_finished",
        "idempotency_key": key,
        "job": p.job,
        "run": p.run,
        "started_at": p.started_at,
        "finished_at": p.finished_at,
        "summary": summary(p),
        "alerts": list(alerts),
        "profile": p.to_json(),
    }


def changes_body(
    key: str, job: str, run: int, sink: str, batch: int, records: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    return {
        "event": "changes",
        "idempotency_key": key,
        "job": job,
        "run": run,
        "sink": sink,
        "batch": batch,
        "records": [dict(r) for r in records],
    }


def _pct(v: Any) -> str:
    return f"{v:.1%}" if isinstance(v, float) and 0 <= v <= 1 else str(v)


def headline(body: Mapping[str, Any]) -> str:
    """One line about an event (Slack's text, a mail's subject)."""
    where = f"{body.get('job')} run {body.get('run')}"
    if body.get("run") is None and body.get("subject"):  # a fleet alert
        where = str(body.get("subject"))
    if body.get("event") == "alert":
        return f"[{body.get('severity')}] {where}: {body.get('alert')} — {body.get('message')}"
    if body.get("event") == "run_finished":
        s = body.get("summary") or {}
        fired = body.get("alerts") or []
        alerts = f", alerts: {', '.join(fired)}" if fired else ", no alert"
        return (
            f"{where} finished: {s.get('records', 0):,} records, {s.get('quarantined', 0):,} "
            f"quarantined, {s.get('pages', 0):,} pages, {s.get('dead', 0):,} dead{alerts}"
        )
    return f"{where}: {len(body.get('records') or [])} changed records (batch {body.get('batch')})"


def _example_line(e: Mapping[str, Any]) -> str:
    parts = [str(e.get("kind", "")), mask_credentials(str(e.get("url", "")))]
    for k in ("key", "warc_record_id", "reason", "error"):
        if e.get(k):
            parts.append(f"{k}={e[k]}")
    return " ".join(p for p in parts if p)


def slack_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """An event as a Slack incoming webhook takes it (``text``, mrkdwn)."""
    lines = [headline(body)]
    if body.get("event") == "alert":
        base = body.get("baseline")
        lines.append(
            f"value {_pct(body.get('value'))}"
            + (f", baseline {_pct(base)}" if base is not None else "")
            + (f", field `{body['field']}`" if body.get("field") else "")
        )
        lines += [f"• {_example_line(e)}" for e in (body.get("examples") or [])[:5]]
    return {"text": "\n".join(lines)}


def email_text(body: Mapping[str, Any]) -> tuple[str, str]:
    """An event as a mail: its subject and plain-text body (the JSON at the end)."""
    text = [headline(body), ""]
    if body.get("event") == "alert":
        text += [
            f"{k}: {body.get(k)}"
            for k in ("alert", "field", "value", "baseline", "threshold")
            if body.get(k) is not None
        ]
        text += ["", "examples:"] + [f"  {_example_line(e)}" for e in body.get("examples") or []]
    text += ["", json.dumps(body, indent=2, ensure_ascii=False)]
    return headline(body)[:200], "\n".join(text)
