"""The data-quality monitors: a run's profile against its job's earlier runs and explicit rules.
Pure: one function, the thresholds and the history passed in, no clock but ``now``.

Each monitor has a stable name, a threshold (``[quality]`` in crawlfleet.toml, or the spider's
own: ``field_coverage``, ``custom_settings = {"quality.item_drop": 0.5}``; ``None`` turns one
off) and a reason an operator can act on. The baseline of a figure is its median over the job's
last ``baseline_runs`` finished runs.

==========================  ==========================================================  =======
monitor                     fires when                                                   checked
==========================  ==========================================================  =======
``item_count``              the run's records fell by more than ``item_drop`` of the     at end
                            baseline
``pages_fetched``           its pages fetched likewise (``pages_drop``)                  at end
``zero_records``            it finished with no record at all                            at end
``field_coverage``          a field's coverage fell by more than ``coverage_drop``       always
                            points below its baseline
``coverage_rule``           a field's coverage is below its rule (``coverage = {...}``)  always
``field_type``              a field whose values were text (or numbers) in at least 90%  always
                            of the baseline's records lost more than ``coverage_drop``
                            of that share
``validation_failure_rate`` more than ``validation_rate`` of its records quarantined     always
``block_rate``              more than ``block_rate`` of its attempts blocked             always
``dead_letters``            more than ``dead_rate`` of its finished requests dead        always
``retry_depth``             more than ``retry_depth`` retries per finished request       always
``max_run_time``            it ran (or has been running) longer than ``max_run_time``    always
==========================  ==========================================================  =======

Shares are judged once a run has ``min_records`` records (``validation_failure_rate``: records
yielded; the request rates: finished requests), so that the first pages of a run do not alarm.
A breach fires once per run and subject (its idempotency key says which), however often it is
found again.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Final

from crawlfleet.data.profile import RunProfile

__all__ = ["MONITORS", "Breach", "QualityRules", "evaluate"]

#: every monitor's name, in the order breaches are listed
MONITORS: Final = (
    "zero_records",
    "item_count",
    "pages_fetched",
    "coverage_rule",
    "field_coverage",
    "field_type",
    "validation_failure_rate",
    "block_rate",
    "dead_letters",
    "retry_depth",
    "max_run_time",
)
#: monitors whose breach means the data is not there (the others: it is worse than usual)
CRITICAL: Final = frozenset({"zero_records", "item_count", "coverage_rule"})
#: share of the baseline's filled values of one type that makes a field "of that type"
TYPE_DOMINANT: Final = 0.9
#: attempts a run needs before its block rate is judged
MIN_ATTEMPTS: Final = 10


@dataclass(frozen=True)
class QualityRules:
    """The thresholds a job's runs are judged by (``[quality]`` with the spider's own over it;
    fixed when the job is submitted and kept with it, so every process judges alike)."""

    baseline_runs: int = 5
    min_records: int = 20
    item_drop: float | None = 0.3
    pages_drop: float | None = 0.3
    coverage_drop: float | None = 0.1
    coverage: Mapping[str, float] = field(default_factory=dict)
    validation_rate: float | None = 0.05
    block_rate: float | None = 0.2
    dead_rate: float | None = 0.1
    retry_depth: float | None = 1.0
    zero_records: bool = True
    max_run_time: float | None = None
    examples: int = 5

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "coverage": dict(self.coverage)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> QualityRules:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})

    @classmethod
    def of(cls, section: Any, field_coverage: Mapping[str, float] | None = None) -> QualityRules:
        """From a ``[quality]`` section (any object with these attributes), a spider's
        ``field_coverage`` rules over its ``coverage``."""
        values = {f.name: getattr(section, f.name) for f in fields(cls) if hasattr(section, f.name)}
        values["coverage"] = {**(values.get("coverage") or {}), **(field_coverage or {})}
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Breach:
    """A monitor firing on a run: what (``alert``, and ``field`` when it is about one), its
    ``value`` against its ``baseline`` (None: no earlier run) and ``threshold``, how bad
    (``severity``), and what examples would show it (``examples``: missing_field, quarantine,
    dead, blocked; None: none would)."""

    alert: str
    value: float
    baseline: float | None
    threshold: float
    message: str
    field: str | None = None
    severity: str = "warning"
    examples: str | None = None

    @property
    def subject(self) -> str:
        return self.field or self.alert

    def key(self, job: str, run: int) -> str:
        """The idempotency key of this breach's alert: one per run and subject."""
        return f"alert:{job}:{run}:{self.alert}:{self.subject}"


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


@dataclass(frozen=True)
class Baseline:
    """The medians of the previous finished runs (None where none had the figure)."""

    runs: int
    records: float | None
    pages: float | None
    coverage: Mapping[str, float]
    text_share: Mapping[str, float]
    number_share: Mapping[str, float]

    @classmethod
    def of(cls, previous: Sequence[RunProfile]) -> Baseline:
        names = {name for p in previous for name in p.fields}

        def per_field(attr: str) -> dict[str, float]:
            out = {}
            for name in names:
                m = _median(getattr(p.fields[name], attr) for p in previous if name in p.fields)
                if m is not None:
                    out[name] = m
            return out

        return cls(
            len(previous),
            _median(p.records for p in previous),
            _median(p.pages for p in previous),
            per_field("coverage"),
            per_field("text_share"),
            per_field("number_share"),
        )


def evaluate(
    profile: RunProfile, previous: Sequence[RunProfile], rules: QualityRules, *, now: float
) -> list[Breach]:
    """The monitors that fire on ``profile`` (a check while its run goes, or its final profile)
    against ``previous`` (the job's earlier runs, newest first; only finished ones count, the
    last ``baseline_runs`` of them)."""
    history = [p for p in previous if p.final and p.run < profile.run][: rules.baseline_runs]
    base = Baseline.of(history)
    out: list[Breach] = []
    if profile.final:
        out += _counts(profile, base, rules)
    if profile.records >= max(1, rules.min_records):
        out += _coverage(profile, base, rules)
        out += _types(profile, base, rules)
    out += _rates(profile, rules)
    out += _run_time(profile, rules, now)
    order = {name: i for i, name in enumerate(MONITORS)}
    return sorted(out, key=lambda b: (order[b.alert], b.field or ""))


def _pct(share: float) -> str:
    return f"{share:.1%}"


def _counts(p: RunProfile, base: Baseline, rules: QualityRules) -> list[Breach]:
    out = []
    if rules.zero_records and p.records == 0:
        out.append(
            Breach(
                "zero_records",
                0.0,
                base.records,
                0.0,
                f"job {p.job} run {p.run} finished with no record ({p.pages} pages fetched, "
                f"{p.quarantined} records quarantined, {p.dead} requests given up)",
                severity="critical",
                examples="quarantine" if p.quarantined else ("dead" if p.dead else None),
            )
        )
    for name, value, baseline, drop, what in (
        ("item_count", p.records, base.records, rules.item_drop, "records"),
        ("pages_fetched", p.pages, base.pages, rules.pages_drop, "pages fetched"),
    ):
        if drop is None or not baseline or value >= baseline * (1 - drop):
            continue
        fell = 1 - value / baseline
        out.append(
            Breach(
                name,
                float(value),
                float(baseline),
                drop,
                f"{what} fell to {value:,} from a median of {baseline:,.0f} over the last "
                f"{base.runs} runs (down {fell:.0%}, more than {drop:.0%})",
                severity="critical" if name in CRITICAL else "warning",
            )
        )
    return out


def _coverage(p: RunProfile, base: Baseline, rules: QualityRules) -> list[Breach]:
    out = []
    for name, least in sorted(rules.coverage.items()):
        cov = p.coverage(name) or 0.0
        if cov < least:
            out.append(
                Breach(
                    "coverage_rule",
                    cov,
                    base.coverage.get(name),
                    least,
                    f"{name}: coverage {_pct(cov)}, below its rule of {_pct(least)} "
                    f"({p.records - (p.fields[name].filled if name in p.fields else 0):,} of "
                    f"{p.records:,} records without it)",
                    field=name,
                    severity="critical",
                    examples="missing_field",
                )
            )
    drop = rules.coverage_drop
    if drop is None:
        return out
    for name, f in sorted(p.fields.items()):
        was = base.coverage.get(name)
        if was is None or was - f.coverage <= drop + 1e-12:
            continue
        out.append(
            Breach(
                "field_coverage",
                f.coverage,
                was,
                drop,
                f"{name}: coverage {_pct(f.coverage)}, down {100 * (was - f.coverage):.1f} "
                f"points from its baseline of {_pct(was)} (more than {100 * drop:g}); "
                f"{p.records - f.filled:,} of {p.records:,} records without it",
                field=name,
                examples="missing_field",
            )
        )
    return out


def _types(p: RunProfile, base: Baseline, rules: QualityRules) -> list[Breach]:
    drop = rules.coverage_drop
    if drop is None:
        return []
    out = []
    for name, f in sorted(p.fields.items()):
        for what, shares, now in (
            ("numbers", base.number_share, f.number_share),
            ("text", base.text_share, f.text_share),
        ):
            was = shares.get(name)
            if was is None or was < TYPE_DOMINANT or now is None or was - now <= drop + 1e-12:
                continue
            out.append(
                Breach(
                    "field_type",
                    now,
                    was,
                    drop,
                    f"{name}: {_pct(now)} of its values are {what}, where {_pct(was)} were "
                    "(the site may have changed how it shows them)",
                    field=name,
                )
            )
    return out


def _rates(p: RunProfile, rules: QualityRules) -> list[Breach]:
    checks: list[tuple[str, float | None, float | None, bool, str, str | None]] = [
        (
            "validation_failure_rate",
            p.validation_failure_ratio,
            rules.validation_rate,
            p.yielded >= max(1, rules.min_records),
            "of the records failed validation (quarantined)",
            "quarantine",
        ),
        (
            "block_rate",
            p.block_ratio,
            rules.block_rate,
            p.pages + p.blocked >= MIN_ATTEMPTS,
            "of the attempts were blocked",
            "blocked",
        ),
        (
            "dead_letters",
            p.dead_ratio,
            rules.dead_rate,
            p.finished_requests >= max(1, rules.min_records),
            "of the finished requests were given up (dead letters)",
            "dead",
        ),
    ]
    out = []
    for name, value, limit, judged, what, examples in checks:
        if limit is None or value is None or not judged or value <= limit:
            continue
        out.append(
            Breach(
                name,
                value,
                None,
                limit,
                f"{_pct(value)} {what}, over {_pct(limit)}",
                examples=examples,
            )
        )
    depth = p.retry_depth
    judged = p.finished_requests >= max(1, rules.min_records)
    if rules.retry_depth is not None and depth is not None and judged and depth > rules.retry_depth:
        out.append(
            Breach(
                "retry_depth",
                depth,
                None,
                rules.retry_depth,
                f"{depth:.2f} retries per finished request, over {rules.retry_depth:g}",
            )
        )
    return out


def _run_time(p: RunProfile, rules: QualityRules, now: float) -> list[Breach]:
    limit = rules.max_run_time
    if limit is None:
        return []
    took = (p.finished_at if p.final and p.finished_at is not None else now) - p.started_at
    if took <= limit:
        return []
    state = "took" if p.final else "has been running for"
    return [
        Breach(
            "max_run_time",
            took,
            None,
            limit,
            f"job {p.job} run {p.run} {state} {took:,.0f}s, over max_run_time {limit:,.0f}s",
        )
    ]
