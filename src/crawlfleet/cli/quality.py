"""``crawlfleet quality``: each run's data profile beside the runs before it, and its alerts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from crawlfleet.cli.common import async_command, opened, queue_option, settings

if TYPE_CHECKING:
    from crawlfleet.frontier.ports import Insights

#: runs shown beside the one asked for
RUNS_SHOWN = 4


@click.command()
@queue_option
@click.option("--job", help="One job (default: every job).")
@click.option("--run", "run", type=int, help="This run and those before it (default: the newest).")
@click.option("--runs", default=RUNS_SHOWN, show_default=True, help="Runs shown side by side.")
@click.option("--json", "as_json", is_flag=True, help="The profiles as JSON.")
@click.pass_context
@async_command
async def quality(
    ctx: click.Context,
    queue: str | None,
    job: str | None,
    run: int | None,
    runs: int,
    as_json: bool,
) -> None:
    """Each run's data profile beside the runs before it: records (valid, quarantined by
    reason), pages fetched, and per field of the spider's model its coverage (the share of
    records where it is filled), the share of distinct values of text fields and min / median
    / max of numbers; then the alerts the quality monitors fired in the run.

    \b
    A run is checked every [quality] check_every seconds while it goes, and once more when it
    finished; a figure that fell against the runs before is marked with "!".
    """
    from crawlfleet.errors import UsageError

    s = settings(ctx, {"queue": queue})
    async with opened(s, create=False) as store:
        names = [job] if job else [j.name for j in await store.list_jobs()]
        if job and await store.get_job(job) is None:
            raise UsageError(f"no job named {job!r}")
        shown = {name: await _profiles(store, name, run, max(1, runs)) for name in names}
    if run is not None and job and not shown[job]:
        raise UsageError(f"job {job} has no profile of run {run}")
    if as_json:
        click.echo(json.dumps([p for ps in shown.values() for p in ps], indent=2))
        return
    lines: list[str] = []
    for name, profiles in shown.items():
        lines += quality_lines(name, profiles)
    click.echo("\n".join(lines) if lines else "no jobs")


async def _profiles(store: Insights, job: str, run: int | None, runs: int) -> list[dict[str, Any]]:
    rows = await store.profiles(job, limit=1000 if run is not None else runs)
    if run is not None:
        rows = [r for r in rows if r.run <= run][:runs]
        if not rows or rows[0].run != run:
            return []
    return [{**json.loads(r.profile), "final": r.final} for r in rows]


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.4g}"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def quality_lines(job: str, profiles: Sequence[Mapping[str, Any]]) -> list[str]:
    """The text of ``quality`` for one job: newest run first, the runs before it beside."""
    if not profiles:
        return [f"job {job}: no profile yet (a run is profiled once it has records)", ""]
    head = profiles[0]
    state = "finished" if head.get("final") else "running (last check)"
    lines = [f"job {job} run {head['run']}: {state}"]
    cols = ["", *(f"run {p['run']}{'' if p.get('final') else '*'}" for p in profiles)]
    rows: list[list[str]] = [cols]
    figures = (
        ("records", "records"),
        ("quarantined", "quarantined"),
        ("pages", "pages"),
        ("dead", "dead"),
        ("blocked", "blocked"),
    )
    for label, key in figures:
        rows.append([label, *(_num(p.get(key, 0)) for p in profiles)])
    reasons = sorted({r for p in profiles for r in (p.get("quarantine_by_reason") or {})})
    for reason in reasons:
        rows.append(
            [
                f"  {reason}",
                *(_num((p.get("quarantine_by_reason") or {}).get(reason, 0)) for p in profiles),
            ]
        )
    names = sorted({n for p in profiles for n in (p.get("fields") or {})})
    if names:
        rows.append(["coverage", *([""] * len(profiles))])
    flagged = {(a.get("field"), a.get("alert")) for a in head.get("alerts") or []}
    for name in names:
        cells = [_pct((p.get("fields") or {}).get(name, {}).get("coverage")) for p in profiles]
        mark = " !" if any(f == name for f, _ in flagged) else ""
        rows.append([f"  {name}{mark}", *cells])
    rows.append(["distinct (text)", *([""] * len(profiles))])
    for name in names:
        shares = [(p.get("fields") or {}).get(name, {}).get("distinct_share") for p in profiles]
        if any(s is not None for s in shares):
            rows.append([f"  {name}", *(_pct(s) for s in shares)])
    numbers = [n for n in names if (head.get("fields") or {}).get(n, {}).get("median") is not None]
    if numbers:
        rows.append(["min / median / max", *([""] * len(profiles))])
    for name in numbers:
        cells = []
        for p in profiles:
            f = (p.get("fields") or {}).get(name, {})
            cells.append(
                f"{_num(f.get('minimum'))} / {_num(f.get('median'))} / {_num(f.get('maximum'))}"
            )
        rows.append([f"  {name}", *cells])
    lines += ["  " + line for line in _table(rows)]
    alerts = head.get("alerts") or []
    if alerts:
        lines.append(f"  alerts of run {head['run']}:")
        lines += [f"  ! {a.get('alert')}: {a.get('message')}" for a in alerts]
    else:
        lines.append(f"  no alert in run {head['run']}")
    lines.append("")
    return lines
