"""Crawl throughput: crawlfleet (1 and 2 worker processes) against Scrapy on the same static shop.

    .venv/bin/python benchmarks/bench_crawl.py [--products 5000] [--runs scrapy,crawlfleet-1]

Generates the shop once (cached in ``benchmarks/out/site-N``), then for each run starts a fresh
nginx (access log on, so the server counts requests), runs the crawler as a subprocess in a fresh
temporary working directory, and measures wall time, requests served, pages/s, peak RSS of the
crawler's whole process tree (polled from /proc every 0.1 s) and CPU time. The records each run
writes are checked against the catalog. Prints a table and the ratios issue 2 sets as targets:
crawlfleet-1 / scrapy >= 10 and crawlfleet-2 / crawlfleet-1 >= 1.5.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_site import ensure_site  # noqa: E402
from nginx import start_nginx  # noqa: E402

from crawlfleet.demo.catalog import Catalog  # noqa: E402

OUT = HERE / "out"
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def commands() -> dict[str, list[str]]:
    """Each run's command line; run with cwd = a fresh temp dir that receives ``out.jsonl``."""
    crawl = [sys.executable, "-m", "crawlfleet", "crawl", str(HERE / "shop_spider.py")]
    return {
        "scrapy": [
            sys.executable,
            "-m",
            "scrapy",
            "runspider",
            str(HERE / "scrapy_shop.py"),
            "-O",
            "out.jsonl",
        ],
        # the reference: aiohttp + selectolax + a set of seen URLs, no store, no WARC
        "bare": [sys.executable, str(HERE / "bare_loop.py"), "-o", "out.jsonl"],
        "crawlfleet-1": [*crawl, "--workers", "1", "-o", "out.jsonl"],
        "crawlfleet-2": [*crawl, "--workers", "2", "-o", "out.jsonl"],
        # the fleet store: the same crawl with the frontier and records in PostgreSQL
        **{
            f"pg-{n}": [*crawl, "--workers", str(n), "-o", "out.jsonl", "--queue", pg_queue(n)]
            for n in (1, 2, 4)
        },
    }


#: PostgreSQL server for the pg-N runs (each run gets its own schema, dropped afterwards)
PG_SERVER = os.environ.get("CRAWLFLEET_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")


def pg_queue(workers: int) -> str:
    return f"{PG_SERVER}?schema=bench_{os.getpid()}_{workers}"


def drop_pg_schemas() -> None:
    import psycopg

    with psycopg.connect(PG_SERVER, autocommit=True) as conn:
        for n in (1, 2, 4):
            conn.execute(f"DROP SCHEMA IF EXISTS bench_{os.getpid()}_{n} CASCADE")


@dataclass
class Result:
    name: str
    ok: bool = False
    error: str = ""
    wall_s: float = 0.0
    requests: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    active_s: float = 0.0
    peak_rss_mb: float = 0.0
    cpu_s: float = 0.0
    records: int = 0
    records_check: str = ""
    workdir: str = ""

    @property
    def complete(self) -> bool:
        """Exited cleanly and wrote exactly the expected records: its figures count."""
        return self.ok and self.records_check == "ok"

    @property
    def status(self) -> str:
        return "ok" if self.complete else "FAILED" if not self.ok else "RECORDS"

    @property
    def pages_per_s(self) -> float:
        return self.requests / self.wall_s if self.wall_s else 0.0

    @property
    def active_pages_per_s(self) -> float:
        return self.requests / self.active_s if self.active_s else 0.0


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants (0 for processes already gone)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_SIZE
        except (OSError, IndexError, ValueError):
            continue
    return total


def run_one(name: str, argv: list[str], site: Path, workdir: Path, timeout: float) -> Result:
    """Run one crawler against a fresh nginx serving ``site``; never raises for crawler failure."""
    result = Result(name=name, workdir=str(workdir))
    log = workdir / "access.log"
    base_url, stop = start_nginx(site, access_log=log)
    env = os.environ | {"BENCH_SITE_URL": base_url + "/", "PYTHONUNBUFFERED": "1"}
    try:
        with open(workdir / "stdout.log", "w") as out, open(workdir / "stderr.log", "w") as err:
            cpu_before = _children_cpu()
            started = time.perf_counter()
            proc = subprocess.Popen(
                argv, cwd=workdir, env=env, stdout=out, stderr=err, start_new_session=True
            )
            peak, timed_out = _watch(proc, timeout)
            result.wall_s = time.perf_counter() - started
            result.cpu_s = _children_cpu() - cpu_before
    finally:
        stop()
    result.peak_rss_mb = peak / 2**20
    _read_access_log(log, result)
    if timed_out:
        result.error = f"timed out after {timeout:.0f}s"
    elif proc.returncode != 0:
        result.error = f"exit code {proc.returncode}: {_tail(workdir / 'stderr.log')}"
    else:
        result.ok = True
    return result


def _watch(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, bool]:
    """Poll the process tree's RSS until ``proc`` exits; returns (peak bytes, timed out)."""
    peak, deadline = 0, time.monotonic() + timeout
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return peak, True
        time.sleep(0.1)
    return peak, False


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _read_access_log(log: Path, result: Result) -> None:
    statuses: Counter[str] = Counter()
    times = []
    if log.exists():
        for line in log.read_text().splitlines():
            msec, status, _ = line.split(" ", 2)
            times.append(float(msec))
            statuses[status] += 1
    result.requests = sum(statuses.values())
    result.statuses = dict(statuses)
    result.active_s = max(times) - min(times) if len(times) > 1 else 0.0


def _tail(path: Path, lines: int = 15) -> str:
    text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return "\n    ".join(text[-lines:]) or "(no output on stderr)"


def check_records(path: Path, expected: list[dict[str, Any]]) -> tuple[int, str]:
    """How many records ``path`` holds and whether they are exactly the expected ones.

    Extra fields (provenance an exporter may add) are ignored; the model's fields must match.
    """
    if not path.exists():
        return 0, "no output file"
    got: dict[str, dict[str, Any]] = {}
    dupes = 0
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            record = record.get("data", record) if isinstance(record.get("data"), dict) else record
            dupes += record.get("sku") in got
            got[record.get("sku", "")] = record
    want = {r["sku"]: r for r in expected}
    missing = want.keys() - got.keys()
    extra = got.keys() - want.keys()
    differ = [
        s for s in want.keys() & got.keys() if any(got[s].get(k) != v for k, v in want[s].items())
    ]
    if not (missing or extra or differ or dupes):
        return len(got) + dupes, "ok"
    return len(got) + dupes, (
        f"{len(missing)} missing, {len(extra)} extra, {len(differ)} differ, {dupes} duplicated"
    )


def print_table(results: list[Result]) -> None:
    header = (
        f"{'run':<14}{'status':<8}{'wall s':>8}{'fetched':>9}{'pages/s':>9}{'active/s':>10}"
        f"{'peak RSS':>10}{'CPU s':>8}{'records':>9}  check"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.name:<14}{r.status:<8}{r.wall_s:>8.1f}{r.requests:>9}"
            f"{r.pages_per_s:>9.1f}{r.active_pages_per_s:>10.1f}{r.peak_rss_mb:>8.0f}MB"
            f"{r.cpu_s:>8.1f}{r.records:>9}  {r.records_check}"
        )
    by_name = {r.name: r for r in results if r.ok}
    for top, bottom, target in (
        ("crawlfleet-1", "scrapy", 10.0),
        ("crawlfleet-1", "bare", 0.8),
        ("crawlfleet-2", "crawlfleet-1", 1.5),
        ("pg-2", "pg-1", None),
        ("pg-4", "pg-1", None),
    ):
        if top in by_name and bottom in by_name and by_name[bottom].pages_per_s:
            ratio = by_name[top].pages_per_s / by_name[bottom].pages_per_s
            if target is None:
                print(f"{top} / {bottom} pages/s: {ratio:.2f}x")
                continue
            verdict = "meets" if ratio >= target else "below"
            if not (by_name[top].complete and by_name[bottom].complete):
                verdict = "NOT VALID, records incomplete; would be " + verdict
            print(f"{top} / {bottom} pages/s: {ratio:.2f}x ({verdict} the {target:g}x target)")
    for r in results:
        if not r.ok:
            print(f"\n{r.name} FAILED: {r.error}\n    workdir: {r.workdir}", file=sys.stderr)
        elif not r.complete:
            print(f"\n{r.name}: wrong records: {r.records_check}\n    workdir: {r.workdir}")


def main(argv: list[str] | None = None) -> int:
    known = commands()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--products", type=int, default=5000)
    parser.add_argument(
        "--runs",
        default="bare,scrapy,crawlfleet-1,crawlfleet-2",
        help=f"comma-separated: {', '.join(known)}",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--keep", action="store_true", help="keep each run's working directory")
    args = parser.parse_args(argv)
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    if unknown := [r for r in runs if r not in known]:
        parser.error(f"unknown runs: {', '.join(unknown)}")

    site = OUT / f"site-{args.products}"
    info = ensure_site(site, args.products)
    expected = Catalog(n_products=args.products).expected_records()
    print(
        f"site: {site} ({info['pages']} pages, {info['bytes'] / info['pages'] / 1e3:.1f} KB/page, "
        f"{len(expected)} valid products); {os.cpu_count()} CPUs",
        flush=True,
    )
    results = []
    for name in runs:
        workdir = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
        print(f"running {name}: {' '.join(known[name])}", flush=True)
        result = run_one(name, known[name], site, workdir, args.timeout)
        result.records, result.records_check = check_records(workdir / "out.jsonl", expected)
        results.append(result)
        if not args.keep and result.complete:
            _remove(workdir)
            result.workdir = ""
    if any(r.startswith("pg-") for r in runs):
        drop_pg_schemas()
    print()
    print_table(results)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    report = OUT / f"results-{stamp}.json"
    report.write_text(json.dumps([_summary(r) for r in results], indent=2))
    print(f"\nresults: {report}")
    return 0 if all(r.complete for r in results) else 1


def _summary(r: Result) -> dict[str, Any]:
    return asdict(r) | {"complete": r.complete, "pages_per_s": r.pages_per_s}


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
