"""Recrawl cost: the second run of a job against its first, on a static shop served by nginx.

    .venv/bin/python benchmarks/bench_recrawl.py [--products 1900] [--changed 0.1]
        [--no-revisit] [--no-scrapy]

nginx sends ``ETag`` and ``Last-Modified`` for static files and answers a conditional request
whose validators still match with ``304 Not Modified``. The shop (~2,000 pages with the default
1,900 products) is copied to a temporary directory and served by one nginx for the whole
sequence (access log on: every request, its status and the bytes nginx sent, headers
included):

1. ``crawl`` (run 1, a new job);
2. ``crawl --recrawl`` with nothing changed (run 2);
3. ``--changed`` of the product pages rewritten (a new name: the record changes, and so do the
   file's ETag and Last-Modified), then ``crawl --recrawl`` (run 3);

and prints each run's wall time (the whole command), its crawling time (first to last request
nginx logged) and the bytes nginx sent, as shares of run 1 (targets of issue 19: run 2 within
20% of the time and 5% of the bytes), with what ``export --changes`` found.

The same three runs then crawl another copy of the shop with ``shop_revisit_spider.py``: a
``sitemap.xml`` lists the product pages with their ``lastmod`` (the file's time, written again
after run 3's rewrite), and ``revisit_min = "1d"``: a run revisits the start URL, the sitemap,
the hubs and the pages whose ``lastmod`` moved, not the pages that are not due.

crawlfleet's sources are byte-compiled first, as an installed package has them.

Then Scrapy with its HTTP cache (``HTTPCACHE_ENABLED``, ``RFC2616Policy``) crawls the same
shop the same three times, one cache directory for the three: how many requests it sent, how
many 304s it got, the bytes, and how many of the changed records its third run's feed has.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_site import ensure_site  # noqa: E402
from nginx import start_nginx  # noqa: E402

OUT = HERE / "out"
_NAME = re.compile(rb"(<article class=\"product\"[^>]*>.*?<h1[^>]*>)(.*?)(</h1>)", re.S)


@dataclass
class Run:
    label: str
    wall_s: float = 0.0
    active_s: float = 0.0
    requests: int = 0
    bytes_sent: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    changes: dict[str, int] = field(default_factory=dict)
    note: str = ""


def read_log(log: Path, offset: int) -> tuple[list[tuple[float, str, int]], int]:
    """The access log lines after byte ``offset``: ``(time, status, bytes sent)``."""
    with open(log, "rb") as f:
        f.seek(offset)
        data = f.read()
    rows = []
    for line in data.decode().splitlines():
        parts = line.split(" ")
        if len(parts) >= 5:
            rows.append((float(parts[0]), parts[1], int(parts[4])))
    return rows, offset + len(data)


def measure(label: str, argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> Run:
    before = log.stat().st_size if log.exists() else 0
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{label}: exit {done.returncode}: {done.stderr[-2000:]}")
    time.sleep(1.5)  # nginx flushes its buffered access log within a second
    rows, _ = read_log(log, before)
    times = [t for t, _, _ in rows]
    return Run(
        label,
        wall_s=wall,
        active_s=max(times) - min(times) if len(times) > 1 else 0.0,
        requests=len(rows),
        bytes_sent=sum(b for _, _, b in rows),
        statuses=dict(Counter(s for _, s, _ in rows)),
    )


def change_products(site: Path, share: float) -> set[str]:
    """Rewrite ``share`` of the product pages with a new name; returns their skus."""
    pages = sorted((site / "product").glob("*.html"))
    step = max(1, round(1 / share)) if share > 0 else 0
    changed = set()
    for page in pages[::step] if step else []:
        html = page.read_bytes()
        new = _NAME.sub(lambda m: m.group(1) + m.group(2) + b" (v2)" + m.group(3), html, count=1)
        if new != html:
            page.write_bytes(new)
            changed.add(page.stem)
    return changed


def write_sitemap(site: Path, base: str) -> int:
    """``sitemap.xml``: every product page, its ``lastmod`` the file's modification time."""
    pages = sorted((site / "product").glob("*.html"))
    rows = []
    for page in pages:
        when = datetime.fromtimestamp(page.stat().st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        rows.append(f"<url><loc>{base}/product/{page.stem}</loc><lastmod>{when}</lastmod></url>")
    (site / "sitemap.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        + "\n".join(rows)
        + "\n</urlset>\n"
    )
    return len(rows)


def crawlfleet_runs(
    site: Path, base: str, log: Path, work: Path, share: float, *, revisit: bool = False
) -> list[Run]:
    """Run 1, 2 (unchanged) and 3 (``share`` changed) of one job; ``revisit``: of
    ``shop_revisit_spider.py`` (a sitemap with lastmod, ``revisit_min``), else of
    ``shop_spider.py`` (every page revisited every run)."""
    spider = str(HERE / ("shop_revisit_spider.py" if revisit else "shop_spider.py"))
    crawl = [sys.executable, "-m", "crawlfleet", "crawl", spider, "--workers", "1", "-q"]
    env = os.environ | {"BENCH_SITE_URL": base + "/", "PYTHONUNBUFFERED": "1"}
    who = "revisit" if revisit else "crawlfleet"
    if revisit:
        write_sitemap(site, base)
    runs = [measure(f"{who} run 1", crawl, work, env, log)]
    runs.append(measure(f"{who} run 2 (unchanged)", [*crawl, "--recrawl"], work, env, log))
    runs[-1].changes = export_changes(work, env)
    time.sleep(1.0)  # a lastmod has whole seconds: the rewritten pages' is later than run 1's
    changed = change_products(site, share)
    if revisit:
        write_sitemap(site, base)
    runs.append(
        measure(f"{who} run 3 ({share:.0%} changed)", [*crawl, "--recrawl"], work, env, log)
    )
    runs[-1].changes = export_changes(work, env)
    runs[-1].note = f"{len(changed)} pages rewritten"
    return runs


def revisit_runs(site: Path, base: str, log: Path, work: Path, share: float) -> list[Run]:
    return crawlfleet_runs(site, base, log, work, share, revisit=True)


def export_changes(work: Path, env: dict[str, str]) -> dict[str, int]:
    argv = [sys.executable, "-m", "crawlfleet", "export", "--changes", "-o", "changes.jsonl"]
    subprocess.run(argv, cwd=work, env=env, check=True, capture_output=True, timeout=600)
    rows = [json.loads(x) for x in (work / "changes.jsonl").read_text().splitlines() if x]
    return dict(Counter(r["_change"] for r in rows))


def scrapy_runs(site: Path, base: str, log: Path, work: Path, share: float) -> list[Run]:
    cache = work / "httpcache"
    argv = [
        sys.executable,
        "-m",
        "scrapy",
        "runspider",
        str(HERE / "scrapy_shop.py"),
        "-s",
        "HTTPCACHE_ENABLED=1",
        "-s",
        "HTTPCACHE_POLICY=scrapy.extensions.httpcache.RFC2616Policy",
        "-s",
        f"HTTPCACHE_DIR={cache}",
        "-s",
        "LOG_LEVEL=WARNING",
    ]
    env = os.environ | {"BENCH_SITE_URL": base + "/", "PYTHONUNBUFFERED": "1"}
    runs = []
    for n, label in enumerate(("run 1", "run 2 (unchanged)", f"run 3 ({share:.0%} changed)")):
        if n == 2:
            changed = change_products(site, share)
        out = work / f"scrapy-{n + 1}.jsonl"
        runs.append(measure(f"scrapy+cache {label}", [*argv, "-O", str(out)], work, env, log))
        if n == 2:
            names = {
                r["sku"]: r["name"]
                for r in (json.loads(x) for x in out.read_text().splitlines() if x)
            }
            seen = sum(1 for sku in changed if names.get(sku, "").endswith("(v2)"))
            runs[-1].note = f"{seen} of {len(changed)} changed records in its feed"
    return runs


def print_table(runs: list[Run], first: Run) -> None:
    print(f"{'run':<36} {'wall s':>7} {'% of 1':>7} {'crawl s':>8} {'% of 1':>7} "
          f"{'requests':>8} {'304s':>6} {'bytes':>12} {'% of 1':>7}  notes")  # fmt: skip
    for r in runs:
        changes = " ".join(f"{k} {v}" for k, v in sorted(r.changes.items()))
        print(
            f"{r.label:<36} {r.wall_s:>7.2f} {r.wall_s / first.wall_s:>7.1%} "
            f"{r.active_s:>8.2f} {r.active_s / first.active_s if first.active_s else 0:>7.1%} "
            f"{r.requests:>8} {r.statuses.get('304', 0):>6} {r.bytes_sent:>12,} "
            f"{r.bytes_sent / first.bytes_sent:>7.1%}  {changes} {r.note}".rstrip()
        )


def compile_package() -> None:
    """Byte-compile crawlfleet's sources, as installing the package does (an environment with
    PYTHONDONTWRITEBYTECODE would otherwise compile every module at each command's start, a
    fixed cost that weighs on a short run and no installed crawlfleet pays)."""
    import compileall

    import crawlfleet

    compileall.compile_dir(Path(crawlfleet.__file__).parent, quiet=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--products", type=int, default=1900)
    parser.add_argument("--changed", type=float, default=0.1, help="share of products changed")
    parser.add_argument("--no-scrapy", action="store_true")
    parser.add_argument(
        "--no-revisit", action="store_true", help="skip the sitemap + revisit_min sequence"
    )
    args = parser.parse_args(argv)
    source = OUT / f"site-{args.products}"
    info = ensure_site(source, args.products)
    results: dict[str, Any] = {"site": info}
    with tempfile.TemporaryDirectory(prefix="bench-recrawl-") as tmp:
        root = Path(tmp)
        compile_package()
        runners = (("crawlfleet", crawlfleet_runs), ("revisit", revisit_runs))
        for who, runner in (*runners, ("scrapy", scrapy_runs)):
            if (who == "scrapy" and args.no_scrapy) or (who == "revisit" and args.no_revisit):
                continue
            site, work = root / f"site-{who}", root / f"work-{who}"
            shutil.copytree(source, site)
            work.mkdir()
            log = root / f"access-{who}.log"
            base, stop = start_nginx(site, access_log=log)
            try:
                runs = runner(site, base, log, work, args.changed)
            finally:
                stop()
            print(f"\n{who}: {info['pages']:,} pages, {info['bytes']:,} bytes of HTML")
            print_table(runs, runs[0])
            results[who] = [r.__dict__ for r in runs]
    (OUT / "bench_recrawl.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
