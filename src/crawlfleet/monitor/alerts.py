"""Alerts as simple rules over the fleet's numbers: pure, one function, thresholds passed in.

The rules (``[control]`` keys in parentheses; see :class:`AlertRules`):

* ``oldest_queued_age`` — a job's request ready on a domain has waited longer than
  ``alert_oldest_age`` seconds (the domain is paced below its backlog, or nothing leases it);
* ``block_rate`` — more than ``alert_block_rate`` of a domain's recent attempts were blocked
  (recent: the lanes' health, counts halved every minute), once it had at least
  :data:`MIN_RECENT_ATTEMPTS` of them;
* ``validation_failure_rate`` — more than ``alert_validation_rate`` of the records a job's spider
  produced failed validation (quarantined), once it produced :data:`MIN_RECORDS`;
* ``no_worker_alive`` — requests are ready to run but no worker reported within
  ``alive_after`` seconds;
* ``worker_local_fault`` — a live worker stopped leasing for a fault of its own machine (its
  WARC disk full, out of file descriptors, its raw store away): it gave its leases back and
  waits for the fault to pass;
* ``worker_stale`` — a worker has not reported for longer than ``alive_after`` seconds and never
  said it stopped (frozen, cut off from the store, or killed): its leases expire and go back to
  the queue (flagged for an hour, :data:`crawlfleet.monitor.overview.STALE_FOR`).

The dashboard and ``status`` show the firing alerts; ``/metrics`` has ``crawlfleet_alerts{rule}``
(how many subjects fire each rule, 0 when none).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["RULES", "Alert", "AlertRules", "duration", "evaluate"]

#: every rule's name, in the order alerts are listed
RULES: Final = (
    "no_worker_alive",
    "worker_local_fault",
    "worker_stale",
    "oldest_queued_age",
    "block_rate",
    "validation_failure_rate",
)
#: the value of a ``worker_local_fault`` alert: what failed the worker
MACHINE_FAULT: Final = 1.0  # its machine: a full disk, no file descriptors left
RAW_STORE_FAULT: Final = 2.0  # its raw store (an object store) away or refusing
#: recent (decayed) attempts a domain needs before its block rate can alert: a lone block is not
MIN_RECENT_ATTEMPTS: Final = 10.0
#: records a job's spider must have produced before its validation failure rate can alert
MIN_RECORDS: Final = 20.0


@dataclass(frozen=True, slots=True)
class AlertRules:
    """The thresholds (``[control]``: ``alert_oldest_age`` seconds, ``alert_block_rate`` and
    ``alert_validation_rate`` as shares from 0 to 1)."""

    oldest_age: float = 600.0
    block_rate: float = 0.2
    validation_rate: float = 0.05


@dataclass(frozen=True, slots=True)
class Alert:
    """One rule firing for one subject (a ``job/domain``, a domain, a job, or the fleet)."""

    rule: str
    subject: str
    value: float
    threshold: float

    @property
    def message(self) -> str:
        if self.rule == "oldest_queued_age":
            return (
                f"{self.subject}: the oldest ready request has waited {self.value:,.0f}s "
                f"(over {self.threshold:,.0f}s)"
            )
        if self.rule == "block_rate":
            return (
                f"{self.subject}: {self.value:.0%} of recent attempts blocked "
                f"(over {self.threshold:.0%})"
            )
        if self.rule == "validation_failure_rate":
            return (
                f"{self.subject}: {self.value:.1%} of records failed validation "
                f"(over {self.threshold:.1%})"
            )
        if self.rule == "worker_local_fault":
            what = (
                "its raw store is away; WARC files wait in its spool"
                if self.value == RAW_STORE_FAULT
                else "disk full or out of files"
            )
            return (
                f"worker {self.subject} stopped leasing: a local fault ({what}); its leases "
                "were given back"
            )
        if self.rule == "worker_stale":
            return (
                f"worker {self.subject} has not reported for {duration(self.value)} (over "
                f"{duration(self.threshold)}) and never said it stopped: frozen, cut off or "
                "killed; its leases expire and go back to the queue"
            )
        return f"{self.value:,.0f} requests ready and no worker alive"

    def as_json(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "subject": self.subject,
            "value": self.value,
            "threshold": self.threshold,
            "message": self.message,
        }


def evaluate(
    rules: AlertRules,
    *,
    oldest: Iterable[tuple[str, float]] = (),
    blocks: Iterable[tuple[str, float, float]] = (),
    validation: Iterable[tuple[str, float, float]] = (),
    ready: int = 0,
    workers_alive: int = 0,
    local_faults: Iterable[str] = (),
    raw_store_down: Iterable[str] = (),
    stale: Iterable[tuple[str, float]] = (),
    alive_after: float = 30.0,
) -> list[Alert]:
    """The alerts firing now.

    ``oldest``: ``(subject, seconds)`` per job and domain; ``blocks``: ``(domain, blocked share,
    recent attempts)``; ``validation``: ``(job, failure share, records produced)``; ``ready``:
    requests ready to run in running jobs; ``workers_alive``: workers heard of lately;
    ``local_faults``: the live workers that stopped leasing for a fault of their own machine
    (``raw_store_down``: those of them whose fault is their raw store);
    ``stale``: ``(worker, seconds silent)`` of the workers that fell silent without stopping
    (``alive_after``: the silence after which a worker is no longer alive).
    """
    out: list[Alert] = []
    if ready > 0 and workers_alive == 0:
        out.append(Alert("no_worker_alive", "fleet", float(ready), 0.0))
    raw = set(raw_store_down)
    out += [
        Alert("worker_local_fault", w, RAW_STORE_FAULT if w in raw else MACHINE_FAULT, 0.0)
        for w in local_faults
    ]
    out += [Alert("worker_stale", worker, silent, alive_after) for worker, silent in stale]
    out += [
        Alert("oldest_queued_age", subject, age, rules.oldest_age)
        for subject, age in oldest
        if age > rules.oldest_age
    ]
    out += [
        Alert("block_rate", domain, share, rules.block_rate)
        for domain, share, attempts in blocks
        if attempts >= MIN_RECENT_ATTEMPTS and share > rules.block_rate
    ]
    out += [
        Alert("validation_failure_rate", job, share, rules.validation_rate)
        for job, share, made in validation
        if made >= MIN_RECORDS and share > rules.validation_rate
    ]
    return out


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h10m`` (as ``status`` writes durations)."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
