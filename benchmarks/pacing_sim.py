"""The pacing controller against model sites, on a fake clock: the scenario table.

    .venv/bin/python benchmarks/pacing_sim.py             # every scenario, a few seconds
    .venv/bin/python benchmarks/pacing_sim.py --only rate  # those whose name contains "rate"

Each row is one simulated crawl (``crawlfleet.policy.simulate``): pages/s in the bulk of the
crawl and its ratio to the same crawl on a clean site, the share of requests answered 429, the
accepted rate against the limit, captcha pages earned, the median server latency against the
unloaded one, time to full pace after push-back stops, attempts spent on a dead host.
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import dataclass

from crawlfleet.policy.simulate import Crawl, Result, Site, simulate

CPU = 0.003  # seconds of worker CPU a page (parse, links, records), as measured on the shop
FAULTS = {"p503": 0.05, "p_cut": 0.02, "p_slow": 0.02}
STALLS = (1.0, 0.3)  # a busy machine: the worker frozen 0.3 s every second


@dataclass(frozen=True)
class Scenario:
    name: str
    site: Site
    crawl: Crawl
    baseline: str | None = None  # the clean scenario to compare pages/s with
    wall_end: float | None = None  # push-back stops here (recovery scenarios)


def scenarios() -> list[Scenario]:
    out = [
        Scenario("clean, 1 worker", Site(), Crawl(pages=3000, client_cpu=CPU)),
        Scenario(
            "faults 5/2/2%, 1 worker",
            Site(**FAULTS),  # type: ignore[arg-type]
            Crawl(pages=3000, client_cpu=CPU),
            baseline="clean, 1 worker",
        ),
        Scenario("clean, 2 workers", Site(), Crawl(pages=3000, client_cpu=CPU, workers=2)),
        Scenario(
            "faults 5/2/2%, 2 workers",
            Site(**FAULTS),  # type: ignore[arg-type]
            Crawl(pages=3000, client_cpu=CPU, workers=2),
            baseline="clean, 2 workers",
        ),
        Scenario(
            "faults, reports batched 50 ms",
            Site(**FAULTS),  # type: ignore[arg-type]
            Crawl(pages=3000, client_cpu=CPU, report_delay=0.05),
            baseline="clean, 1 worker",
        ),
        Scenario("lone 503s (5%)", Site(p503=0.05), Crawl(pages=3000, client_cpu=CPU)),
        Scenario(
            "clean, busy machine",
            Site(),
            Crawl(pages=3000, client_cpu=CPU, stalls=STALLS),
        ),
        Scenario(
            "faults, busy machine",
            Site(**FAULTS),  # type: ignore[arg-type]
            Crawl(pages=3000, client_cpu=CPU, stalls=STALLS),
            baseline="clean, busy machine",
        ),
    ]
    for n in (5, 40, 200):
        for width in (8, 32):
            pages = max(1000, n * 60)
            out.append(Scenario(f"rate N={n}, c={width}", Site(rate_limit=n), Crawl(pages, width)))
    out.append(
        Scenario(
            "rate N=40, lane seeded at c=32",
            Site(rate_limit=40),
            Crawl(pages=2400, start_width=32),
        )
    )
    out.append(
        Scenario(
            "rate N=40, reports batched 50 ms",
            Site(rate_limit=40),
            Crawl(pages=2400, report_delay=0.05),
        )
    )
    for base in (0.005, 0.05):
        ms = round(base * 1000)
        out.append(
            Scenario(
                f"latency {ms}+{ms} ms/in flight",
                Site(latency=base, per_request=base),
                Crawl(pages=3000 if base < 0.01 else 600, client_cpu=CPU),
            )
        )
        out.append(
            Scenario(
                f"latency {ms}+{ms} ms/in flight, lane seeded at c=32",
                Site(latency=base, per_request=base),
                Crawl(pages=3000 if base < 0.01 else 600, client_cpu=CPU, start_width=32),
            )
        )
        for respace in (False, True):
            out.append(
                Scenario(
                    f"latency {ms}+{ms} ms/in flight, busy machine"
                    + (", late starts respaced" if respace else ""),
                    Site(latency=base, per_request=base),
                    Crawl(
                        pages=3000 if base < 0.01 else 600,
                        client_cpu=CPU,
                        stalls=STALLS,
                        respace_late=respace,
                    ),
                )
            )
    for end in (12.0, 30.0, 100.0):
        for follows in (False, True):
            out.append(
                Scenario(
                    f"wall 5-{end:.0f} s" + (", next_at follows" if follows else ""),
                    Site(blocked_between=(5.0, end)),
                    Crawl(pages=50000, max_attempts=1000, until=end + 400, next_at_follows=follows),
                    wall_end=end,
                )
            )
    out.append(Scenario("dead host, 10 min", Site(dead=True), Crawl(pages=100, until=600)))
    out.append(Scenario("crawl-delay 2 s", Site(crawl_delay=2.0), Crawl(pages=60)))
    return out


def row(s: Scenario, r: Result, results: dict[str, Result]) -> dict[str, str]:
    """The table's cells for one result."""
    cells = {
        "scenario": s.name,
        "pages/s": f"{r.throughput:.1f}",
        "vs clean": "",
        "429": f"{r.share(429):.2%}",
        "rate/N": "",
        "captchas": str(r.captchas),
        "latency x": "",
        "recover s": "",
        "requests": str(r.requests),
        "done": f"{r.done}/{s.crawl.pages}",
    }
    if s.baseline:
        cells["vs clean"] = f"{r.throughput / results[s.baseline].throughput:.2f}"
    if s.site.rate_limit:
        settled = r.accepted_rate(r.end / 4, r.end)
        cells["rate/N"] = f"{settled / s.site.rate_limit:.2f} (max {r.max_window()})"
    if s.site.per_request:
        unloaded = s.site.latency + s.site.per_request
        cells["latency x"] = f"{r.median_latency(r.end / 4, r.end) / unloaded:.2f}"
    if s.wall_end is not None:
        back = r.recovered_at(s.wall_end)
        peak = max((d for t, d, _ in r.states if t < s.wall_end), default=0.0)
        cells["recover s"] = "never" if back is None else f"{back - s.wall_end:.0f} (d {peak:.0f})"
    if s.site.dead:
        cells["requests"] = f"{r.requests} in 600 s"
    if s.site.crawl_delay:
        gaps = [b - a for (a, _), (b, _) in itertools.pairwise(r.arrivals)]
        cells["pages/s"] += f" (min gap {min(gaps):.2f} s)"
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run the scenarios whose name has this")
    args = parser.parse_args()
    results: dict[str, Result] = {}
    rows = []
    started = time.perf_counter()
    for s in scenarios():
        if args.only not in s.name and s.name not in {x.baseline for x in scenarios()}:
            continue
        results[s.name] = simulate(s.site, s.crawl)
        rows.append(row(s, results[s.name], results))
    widths = {k: max(len(k), *(len(r[k]) for r in rows)) for k in rows[0]}
    print("  ".join(k.ljust(w) for k, w in widths.items()))
    for r in rows:
        print("  ".join(r[k].ljust(w) for k, w in widths.items()))
    print(f"\n{len(rows)} simulated crawls in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
