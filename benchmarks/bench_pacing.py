"""The pace the controller keeps on the demo shop over real sockets, as wall-time figures: the
numbers ``tests/integration/test_pacing_scenarios.py`` leaves out because a loaded machine
moves them (the tests assert the controller's decisions instead).

* ``faults``: pages/s in the bulk of a crawl with random faults (5% 503, 2% cut, 2% three-second
  pages) against the same crawl clean, best of ``--runs`` each (target: 80% or more);
* ``rate``: the settled rate under a 40/s per-client limit against the limit (target: 70% to
  100%, 429s at most 1%);
* ``latency``: pages/s against one request at a time on a shop whose latency grows with the
  requests in flight (target: at least half).

    PYTHONPATH=src:. .venv/bin/python benchmarks/bench_pacing.py [--only faults] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from tests.integration.helpers import demo_shop, shop_stats
from tests.integration.test_pacing_scenarios import FAULTS, bulk_rate, crawl


def _crawl(shop: tuple[str, ...], timeout: float = 180) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, demo_shop(*shop) as base:
        crawl(Path(tmp), base, timeout=timeout)
        return shop_stats(base)


def faults(runs: int) -> dict[str, Any]:
    rates: dict[str, float] = {}
    for label, extra in (("clean", ()), ("faults", FAULTS)) * runs:
        stats = _crawl(("--products", "1000", *extra))
        rates[label] = max(rates.get(label, 0.0), bulk_rate(stats))
    ratio = rates["faults"] / rates["clean"]
    return {"clean_pages_s": round(rates["clean"], 1), "faults_pages_s": round(rates["faults"], 1),
            "ratio": round(ratio, 2), "target": ">= 0.8"}  # fmt: skip


def rate() -> dict[str, Any]:
    limit = 40
    stats = _crawl(("--products", "1000", "--rate-limit", str(limit), "--captcha-after", "20",
                    "--captcha-window", "10", "--captcha-for", "60"))  # fmt: skip
    timeline = stats["timeline"]
    end = timeline[-1][0]
    settled = [t for t, status in timeline if status != 429 and end / 4 <= t < end]
    settled_rate = len(settled) / (end * 3 / 4)
    return {"limit": limit, "settled_rate": round(settled_rate, 1),
            "of_limit": round(settled_rate / limit, 2), "target": "0.7 to 1.0",
            "share_429": round(stats["statuses"].get("429", 0) / stats["requests"], 4)}  # fmt: skip


def latency() -> dict[str, Any]:
    stats = _crawl(("--products", "1200", "--latency", "0.005", "--latency-per-request", "0.005"))
    one_at_a_time = 1 / stats["load"]["unloaded_latency"]
    got = bulk_rate(stats)
    return {"pages_s": round(got, 1), "one_at_a_time_pages_s": round(one_at_a_time, 1),
            "ratio": round(got / one_at_a_time, 2), "target": ">= 0.5",
            "median_latency": stats["load"]["median_latency"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("faults", "rate", "latency"))
    parser.add_argument("--runs", type=int, default=2, help="runs of each faults crawl")
    args = parser.parse_args()
    scenarios = {"faults": lambda: faults(args.runs), "rate": rate, "latency": latency}
    for name, scenario in scenarios.items():
        if args.only in (None, name):
            print(f"{name}: {json.dumps(scenario())}", flush=True)


if __name__ == "__main__":
    main()
