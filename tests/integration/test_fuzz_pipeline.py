"""Fuzzing the data path: Hypothesis-made pages (deep, broken, attribute floods, odd encodings,
NULs) and spider outputs (any Python value) through response → parse (off the loop) → validate
→ the SQLite store. Only records, quarantine rows or named errors come out, the store takes
every page, and the event loop answers (a heartbeat ticks) throughout."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlfleet.data.captures import Provenance
from crawlfleet.errors import TooComplex, TooManyItems
from crawlfleet.frontier.sqlite import SQLiteFrontier
from crawlfleet.model import (
    Completion,
    DeadReason,
    DomainLimits,
    Failure,
    Job,
    JobSpec,
    JobState,
    NewRequest,
)
from crawlfleet.response import Response
from crawlfleet.spider import Request, Spider
from crawlfleet.urls import canonicalize, fingerprint, host_of
from crawlfleet.worker.extract import JobRuntime, PageOutput
from crawlfleet.worker.offloop import OffLoop

#: the longest the event loop may go without a heartbeat tick while a page is parsed
LOOP_BOUND = 0.5
PAGE = "http://fuzz.test/page"

TAGS = ["div", "p", "li", "ul", "table", "tr", "td", "b", "a", "span", "svg", "script", "br"]
ENCODINGS = ["utf-8", "latin-1", "utf-16", "shift_jis", "utf-7", "x-bogus", "base64"]


@st.composite
def pages(draw: st.DrawFn) -> tuple[bytes, str]:
    """A page's body and its Content-Type."""
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        tag = draw(st.sampled_from(TAGS))
        kind = draw(st.sampled_from(["deep", "attrs", "text", "broken", "links"]))
        if kind == "deep":
            levels = draw(st.integers(1, 3000))
            close = draw(st.booleans())
            parts.append(f"<{tag}>" * levels + "x" + (f"</{tag}>" * levels if close else ""))
        elif kind == "attrs":
            n = draw(st.integers(1, 3000))
            parts.append(f"<{tag} " + " ".join(f'a{i}="{i}"' for i in range(n)) + ">y")
        elif kind == "text":
            parts.append(draw(st.text(max_size=200)))  # surrogates and NULs included
        elif kind == "broken":
            parts.append(draw(st.sampled_from(["<", "</", "<!--", "<div", "<a href='", "\x00"])))
        else:
            parts.append(f"<a href='/l{draw(st.integers(0, 50))}'>l</a>")
    html = "".join(parts)
    encoding = draw(st.sampled_from(ENCODINGS))
    body = html.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        body = draw(st.binary(max_size=64)) + body
    return body, f"text/html; charset={encoding}"


def _requests() -> st.SearchStrategy[Any]:
    urls = st.one_of(st.text(max_size=40), st.integers(), st.none(), st.just("http://fuzz.test/x"))
    callbacks = st.sampled_from([None, "parse", "nope", "__init__"])
    return st.builds(lambda u, c: Request(u, callback=c), urls, callbacks)


LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and infinities too
    st.text(alphabet=st.characters(codec=None), max_size=30),  # lone surrogates too
    st.binary(max_size=20),
    st.just(object()),
    st.just(math.inf),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=4),
        st.tuples(inner, inner),
        st.frozensets(st.integers(), max_size=3),
    ),
    max_leaves=20,
)
OUTPUTS = st.lists(
    st.one_of(VALUES, st.dictionaries(st.text(max_size=8), VALUES, max_size=5), _requests()),
    max_size=12,
)


def _nested(levels: int) -> dict[str, Any]:
    top: dict[str, Any] = {}
    node = top
    for _ in range(levels):
        node["x"] = {}
        node = node["x"]
    return top


class Fuzz(Spider):
    name = "fuzz"
    start_urls = [PAGE]
    items: list[Any] = []

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"title": response.css("title::text").get(), "n": len(response.css("div"))}
        yield {"first": response.xpath("//p/text()").get()}
        yield from response.follow_all("a")
        yield from self.items


async def _heartbeat(gaps: list[float], stop: asyncio.Event) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.005)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


async def _one(
    store: SQLiteFrontier, offloop: OffLoop, n: int, body: bytes, ctype: str, items: list[Any]
) -> None:
    Fuzz.items = items
    rt = JobRuntime(Job(1, "fuzz", "fuzz.py", JobState.RUNNING, {}, 0.0), Fuzz)
    rt.max_yields = 50
    url = canonicalize(f"{PAGE}/{n}")
    seed = NewRequest(url, fingerprint(url, "GET", None), host_of(url))
    await store.enqueue("fuzz", [seed])
    (lease,) = await store.lease("w", 1, 30.0)
    response = Response(url, 200, {"content-type": ctype}, body)
    gaps: list[float] = []
    stop = asyncio.Event()
    beat = asyncio.create_task(_heartbeat(gaps, stop))

    def run(deadline: float) -> PageOutput:
        return rt.process(
            response,
            page_url=url,
            callback=None,
            depth=0,
            fetched_at=1.0,
            warc=Provenance(),
            deadline=deadline,
        )

    out: PageOutput | None = None
    named: DeadReason | None = None
    try:
        out = await offloop.run(run, 5.0)
    except TooComplex:
        named = DeadReason.TOO_COMPLEX
    except TooManyItems:
        named = DeadReason.TOO_MANY_ITEMS
    finally:
        stop.set()
        await beat
    assert max(gaps, default=0.0) < LOOP_BOUND, f"the loop stalled {max(gaps):.2f}s"
    if out is None:  # the page ends dead with its name, as the worker ends it: no lease left open
        assert named is not None
        dead = Failure(lease.ref, named.value, dead_reason=named)
        settled = await store.report("w", failed=[dead])
        assert settled.failed == {lease.id}, "the store took the dead page"
        return
    done = Completion(lease.ref, 200, out.records, out.quarantined, out.discovered)
    settled = await store.report("w", [done])
    assert settled.completed == {lease.id}, "the store took the page"


_examples = iter(range(1 << 30))  # a fresh URL per example: one store for them all


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # the store is shared by the examples on purpose
    ],
)
@given(page=pages(), items=OUTPUTS, deep=st.sampled_from([0, 0, 0, 5000]))
def test_fuzz__pages_and_spider_output_end_as_records_quarantine_or_named_errors(
    tmp_path: Path, page: tuple[bytes, str], items: list[Any], deep: int
) -> None:
    if deep:
        items = [*items, {"deep": _nested(deep)}]
    n = next(_examples)

    async def main() -> None:
        store = SQLiteFrontier(tmp_path / "queue.db")
        await store.open()
        try:
            if await store.get_job("fuzz") is None:
                limits = DomainLimits(100, 0.0)
                await store.submit_job(JobSpec(name="fuzz", spider="f.py", default_limits=limits))
            await _one(store, OffLoop(), n, page[0], page[1], items)
            async for row in store.iter_quarantine("fuzz"):
                assert row.errors, "a quarantine row says why"
            async for record in store.iter_records("fuzz"):
                assert isinstance(record.data, dict)
        finally:
            await store.close()

    asyncio.run(main())
