"""Hostile input figures: the nesting ladder and an endless callback.

Run: ``.venv/bin/python benchmarks/bench_hostile.py [--before-max LEVELS] [--levels 5000,...]``.

* Nesting ladder: a page with N nested ``<div>`` around one ``<p>``. *before*: what a spider paid
  without the bound (lexbor parse and a CSS select, lxml parse and an XPath, as the selectors ran
  them); *after*: ``Response.css`` until it raises ``TooComplex`` (the nesting walk, no tree).
  *before* is quadratic, so it runs only up to ``--before-max`` levels (default 20,000).
* Endless callback: ``JobRuntime.process`` on a callback yielding new Requests forever, with the
  default ``worker.max_yields_per_page``: seconds until ``TooManyItems`` and the process's peak
  RSS (run first, so the ladder's trees do not count).
* The shop page of ``bench_response.py``: the check's cost on an ordinary page (a count of its
  start tags; the walk only past the bound), against lexbor's parse of it.
"""

from __future__ import annotations

import argparse
import itertools
import resource
import time
from collections.abc import Callable, Iterator
from typing import Any

from crawlfleet.data.captures import Provenance
from crawlfleet.errors import TooComplex, TooManyItems
from crawlfleet.model import Job, JobState
from crawlfleet.response import Response
from crawlfleet.selectors.nesting import measure, over
from crawlfleet.spider import Request, Spider
from crawlfleet.worker.extract import JobRuntime

URL = "http://bench.test/"


def nested(levels: int) -> bytes:
    return b"<html><body>" + b"<div>" * levels + b"<p>deep</p>" + b"</div>" * levels


def seconds(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def before(body: bytes) -> tuple[float, float, bool]:
    """Seconds for lexbor's parse + select, lxml's parse + XPath, and whether XPath found it."""
    import parsel
    from selectolax.lexbor import LexborHTMLParser

    css = seconds(lambda: LexborHTMLParser(body).css("p"))
    found: list[Any] = []
    xpath = seconds(lambda: found.extend(parsel.Selector(body=body).xpath("//p/text()").getall()))
    return css, xpath, bool(found)


def after(body: bytes) -> tuple[float, str]:
    response = Response(URL, 200, {"content-type": "text/html"}, body)
    started = time.perf_counter()
    try:
        response.css("p::text").get()
        outcome = "parsed"
    except TooComplex:
        outcome = "too_complex"
    return time.perf_counter() - started, outcome


class Endless(Spider):
    name = "endless"
    start_urls = [URL]

    def parse(self, response: Response) -> Iterator[Any]:
        for n in itertools.count():
            yield Request(f"{URL}page/{n}")


def endless() -> tuple[float, float, str]:
    rt = JobRuntime(Job(1, "endless", "endless.py", JobState.RUNNING, {}, 0.0), Endless)
    response = Response(URL, 200, {}, b"<p>x</p>")
    started = time.perf_counter()
    try:
        rt.process(
            response, page_url=URL, callback=None, depth=0, fetched_at=0.0, warc=Provenance()
        )
        outcome = "no error"
    except TooManyItems as exc:
        outcome = f"TooManyItems: {exc}"
    took = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return took, peak_mb, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="5000,10000,20000,100000")
    parser.add_argument("--before-max", type=int, default=20_000)
    args = parser.parse_args()

    start_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    took, peak_mb, outcome = endless()
    print(f"endless callback: {took:.2f} s to {outcome}")
    print(f"  peak RSS {peak_mb:.0f} MB (was {start_mb:.0f} MB before it)")

    print(f"{'levels':>8} {'before css':>11} {'before xpath':>13} {'after':>9}  outcome")
    for levels in (int(n) for n in args.levels.split(",")):
        body = nested(levels)
        took_after, outcome = after(body)
        if levels <= args.before_max:
            css, xpath, found = before(body)
            was = f"{css:10.3f}s {xpath:12.4f}s" + ("" if found else " (XPath: nothing)")
        else:
            was = f"{'skipped':>11} {'':>13}"
        print(f"{levels:>8} {was} {took_after:8.4f}s  {outcome}")

    import sys

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from bench_response import page
    from selectolax.lexbor import LexborHTMLParser

    shop = page()
    rounds = 200
    walk = seconds(lambda: [measure(shop) for _ in range(rounds)]) / rounds
    gate = seconds(lambda: [over(shop, 1000, 10**8) for _ in range(rounds)]) / rounds
    lexbor = seconds(lambda: [LexborHTMLParser(shop) for _ in range(rounds)]) / rounds
    print(f"shop page ({len(shop) // 1024} KB, {shop.count(b'<')} tags):")
    print(
        f"  check before parsing {gate * 1e6:.0f} us (the walk, were it needed: "
        f"{walk * 1e6:.0f} us), lexbor parse {lexbor * 1e6:.0f} us"
    )


if __name__ == "__main__":
    main()
