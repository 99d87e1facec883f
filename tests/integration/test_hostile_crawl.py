"""Whole crawls (the ``crawlfleet`` command, a real worker) against the hostile site: redirects
into robots-disallowed paths, empty pages, pages with too many links, session-id parameters and
credentials in start URLs, each ending with a named outcome."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.sites.hostile import HostileSite, hostile_site

__all__ = ["hostile_site"]  # the imported fixture is used by name

pytestmark = pytest.mark.slow

SPIDER = """\
from crawlfleet import Spider


class Hostile(Spider):
    name = "hostile"
    start_urls = {start_urls!r}
{extra}
    def parse(self, response):
        yield {{"url": response.url, "title": response.css("title::text").get()}}
        yield from response.follow_all("a")
"""


def write_spider(path: Path, start_urls: list[str], **attrs: Any) -> Path:
    extra = "".join(f"    {k} = {v!r}\n" for k, v in attrs.items())
    path.write_text(SPIDER.format(start_urls=start_urls, extra=extra))
    return path


async def crawlfleet(cwd: Path, *args: str, timeout: float = 120) -> tuple[int, str, str]:
    """Run the command while this test's event loop keeps serving the hostile site."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "crawlfleet",
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ),
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def requests_of(cwd: Path) -> dict[str, tuple[str, str | None, int, str | None]]:
    """``url -> (state, dead_reason, attempts, last_error)`` from the crawl's SQLite store."""
    with sqlite3.connect(cwd / ".crawlfleet" / "queue.db") as db:
        rows = db.execute(
            "SELECT url, state, dead_reason, attempts, last_error FROM requests"
        ).fetchall()
    return {url: (state, reason, attempts, error) for url, state, reason, attempts, error in rows}


async def test_redirects_off_robots_or_scope__end_dead_with_their_reason_unfetched(
    hostile_site: HostileSite, tmp_path: Path
) -> None:
    hostile_site.robots = "nodelay"
    into_private = hostile_site.url("/redirect-to?url=/private/secret-page")
    offsite = hostile_site.url("/redirect-to?url=" + hostile_site.url("/leaf", host="localhost"))
    spider = write_spider(tmp_path / "s.py", [into_private, offsite])
    code, _, err = await crawlfleet(tmp_path, "crawl", str(spider), "-o", "records.jsonl")
    assert code == 1, err  # no page could be fetched
    assert hostile_site.hits["/private/secret-page"] == 0, "fetched past a disallowed redirect"
    assert hostile_site.hits["/leaf"] == 0, "fetched past a redirect off the crawl's scope"
    assert not (tmp_path / "records.jsonl").read_text().strip()
    rows = requests_of(tmp_path)
    assert rows[into_private][:2] == ("dead", "robots")
    assert rows[offsite][:2] == ("dead", "out_of_scope")
    assert "localhost" in (rows[offsite][3] or "")


async def test_empty_page__one_retry_then_dead_empty(
    hostile_site: HostileSite, tmp_path: Path
) -> None:
    hostile_site.robots = "nodelay"
    spider = write_spider(tmp_path / "s.py", [hostile_site.url("/empty")])
    started = time.monotonic()
    await crawlfleet(tmp_path, "crawl", str(spider))
    took = time.monotonic() - started
    (state, reason, attempts, error) = requests_of(tmp_path)[hostile_site.url("/empty")]
    assert (state, reason, attempts) == ("dead", "empty", 2)
    assert error == "HTTP 200 (empty page)"
    assert hostile_site.hits["/empty"] == 2
    assert took < 20, f"an empty page took {took:.1f}s"


async def test_a_page_over_max_links_per_page__the_rest_dropped_counted_and_logged(
    hostile_site: HostileSite, tmp_path: Path
) -> None:
    hostile_site.robots = "nodelay"
    spider = write_spider(
        tmp_path / "s.py", [hostile_site.url("/links?n=200")], max_links_per_page=50
    )
    code, _, err = await crawlfleet(tmp_path, "crawl", str(spider))
    assert code == 0, err
    rows = requests_of(tmp_path)
    assert len(rows) == 1 + 50
    assert all(state == "done" for state, *_ in rows.values())
    assert sum(n for path, n in hostile_site.hits.items() if path.startswith("/links/leaf/")) == 50
    assert "150 links dropped on " + hostile_site.url("/links?n=200") in err


async def test_session_id_parameter__fetched_as_asked__one_line_errors_in_dead_list(
    hostile_site: HostileSite, tmp_path: Path
) -> None:
    hostile_site.robots = "nodelay"
    asked = hostile_site.url("/leaf?sessionid=abc&x=1")
    twin = hostile_site.url("/leaf?x=1&sessionid=other")  # the same page for dedup
    tmp_path.joinpath("s.py").write_text(
        "from crawlfleet import Spider\n\n"
        "class Hostile(Spider):\n"
        "    name = 'hostile'\n"
        f"    start_urls = [{asked!r}, {twin!r}]\n\n"
        "    def parse(self, response):\n"
        "        raise ValueError('first line\\nsecond line')\n"
    )
    await crawlfleet(tmp_path, "crawl", "s.py")
    assert hostile_site.asked["/leaf?sessionid=abc&x=1"] == 1  # the URL as asked, once
    assert sum(n for path, n in hostile_site.asked.items() if path.startswith("/leaf")) == 1
    rows = requests_of(tmp_path)
    assert list(rows) == [hostile_site.url("/leaf?sessionid=abc&x=1")]
    code, out, err = await crawlfleet(tmp_path, "dead", "list")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 1, out
    assert "\tparse error: ValueError: first line | second line at " in lines[0], lines[0]


async def test_robots_txt_500_forever__dead_robots_unavailable_after_the_give_up__replayable(
    hostile_site: HostileSite, tmp_path: Path
) -> None:
    hostile_site.robots = "500"
    (tmp_path / "crawlfleet.toml").write_text(
        "[pacing]\nrobots_recheck = 0.5\nrobots_give_up = 7.0\n"
    )
    spider = write_spider(tmp_path / "s.py", [hostile_site.url("/leaf"), hostile_site.url("/")])
    started = time.monotonic()
    code, _, err = await crawlfleet(tmp_path, "crawl", str(spider))
    took = time.monotonic() - started
    assert code == 1, err
    # while it waited, the progress line said for what (a plain line every 5 s off a terminal)
    assert "waiting for robots.txt of 127.0.0.1 (HTTP 500): 2 requests" in err, err
    rows = requests_of(tmp_path)
    assert {(s, r) for s, r, _, _ in rows.values()} == {("dead", "robots_unavailable")}, rows
    assert {e for *_, e in rows.values()} == {
        "robots.txt unreachable for over 7s (HTTP 500): given up"
    }
    assert hostile_site.hits["/leaf"] == 0
    assert hostile_site.hits["/robots.txt"] >= 3  # rechecked until the give-up
    assert 7.0 <= took < 40, f"gave up after {took:.1f}s"

    hostile_site.robots = "nodelay"  # the site is back: replay, crawl again
    code, out, err = await crawlfleet(tmp_path, "dead", "replay", "--job", "hostile")
    assert code == 0 and "2 requests queued again" in out, out + err
    code, _, err = await crawlfleet(tmp_path, "crawl", str(spider))
    assert code == 0, err
    assert {s for s, *_ in requests_of(tmp_path).values()} == {"done"}
    assert hostile_site.hits["/leaf"] == 1


def _texts_of_files(root: Path, skip: set[Path]) -> dict[str, bytes]:
    """Every file under ``root`` as bytes: WARC and other gzip files gunzipped, Parquet read
    back as text (its pages may be compressed), the SQLite store also dumped as SQL."""
    import gzip

    import pyarrow.parquet as pq

    texts: dict[str, bytes] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p not in skip):
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        elif path.suffix == ".parquet":
            data = json.dumps(pq.read_table(path).to_pylist()).encode()
        elif path.name == "queue.db":
            with sqlite3.connect(path) as db:
                data += "\n".join(db.iterdump()).encode("utf-8", "surrogatepass")
        texts[str(path.relative_to(root))] = data
    return texts


def _postgres_dump(dsn: str) -> bytes:
    """Every row of every table of the store, as text (bytea columns decoded too)."""
    import psycopg

    out: list[str] = []
    with psycopg.connect(dsn) as db:
        tables = db.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
        ).fetchall()
        for (table,) in tables:
            for (row,) in db.execute(f'SELECT t::text FROM "{table}" t').fetchall():
                out.append(f"{table}: {row}")
        blobs = db.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND data_type = 'bytea'"
        ).fetchall()
        for table, column in blobs:
            query = f'SELECT encode("{column}", \'escape\') FROM "{table}"'
            out += [str(value) for (value,) in db.execute(query).fetchall() if value]
    assert len(out) > 10, "the dump holds next to nothing: wrong database?"
    return "\n".join(out).encode()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_credentials_in_a_start_url__pages_fetched__password_in_no_artefact(
    hostile_site: HostileSite, tmp_path: Path, backend: str
) -> None:
    from tests.conftest import PG_TEST_DB
    from tests.sites.hostile import AUTH_PASSWORD, AUTH_USER

    hostile_site.robots = "nodelay"
    start = hostile_site.url("/auth/").replace("://", f"://{AUTH_USER}:{AUTH_PASSWORD}@")
    spider_dir = tmp_path / "spider"
    spider_dir.mkdir()
    spider = write_spider(spider_dir / "s.py", [start])
    work = tmp_path / "work"
    work.mkdir()
    queue = ["--queue", PG_TEST_DB.fresh()] if backend == "postgres" else []
    outputs: list[str] = []

    async def run(*args: str) -> str:
        code, out, err = await crawlfleet(work, *args, *queue)
        outputs.append(out + err)
        assert code == 0, err
        return out

    await run("crawl", str(spider), "-o", "records.jsonl")
    records = [json.loads(line) for line in (work / "records.jsonl").read_text().splitlines()]
    assert sorted(r["title"] for r in records) == ["home", "page/0", "page/1", "page/2"]
    assert hostile_site.hits["/auth/page/2"] == 1  # no 401 on the way: each fetched once
    for fmt in ("jsonl", "json", "csv", "parquet"):
        await run("export", "--format", fmt, "--provenance", "-o", f"export.{fmt}")
    assert "page/1" in (work / "export.csv").read_text()
    await run("status")
    await run("status", "--json")
    await run("dead", "list")
    await run("jobs")

    artefacts = _texts_of_files(work, skip=set())
    artefacts["command output"] = "\n".join(outputs).encode()
    if backend == "postgres":
        artefacts["postgres dump"] = _postgres_dump(queue[1])
    assert any(name.endswith(".warc") or ".warc" in name for name in artefacts), artefacts.keys()
    token = base64.b64encode(f"{AUTH_USER}:{AUTH_PASSWORD}".encode())
    for name, data in artefacts.items():
        assert AUTH_PASSWORD.encode() not in data, f"the password is in {name}"
        assert token not in data, f"the Basic credentials are in {name}"
    pages = (
        artefacts["postgres dump"] if backend == "postgres" else artefacts[".crawlfleet/queue.db"]
    )
    assert hostile_site.url("/auth/page/1").encode() in pages  # the dump is of this crawl


LATE_START = """\
from crawlfleet import Spider


class Late(Spider):
    name = "late"

    def __init__(self, site=None, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [site]  # Scrapy's way: the start from an argument (-a site=...)

    def parse(self, response):
        yield {"url": response.url}
"""


async def test_start_urls_set_in_init__their_host_may_be_private_and_the_crawl_ends(
    hostile_site: HostileSite, tmp_path: Path
) -> None:
    hostile_site.robots = "nodelay"
    (tmp_path / "crawlfleet.toml").write_text("[pacing]\nrobots_give_up = 5.0\n")
    (tmp_path / "late.py").write_text(LATE_START)
    site = "site=" + hostile_site.url("/leaf")
    code, out, err = await crawlfleet(tmp_path, "crawl", "late.py", "-a", site, "-o", "-")
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == [{"url": hostile_site.url("/leaf")}]
    assert hostile_site.hits["/robots.txt"] == 1  # fetched: the guard let the named host in


SCRAPY_HABITS = """\
import json
from crawlfleet import Request, Spider


class Habits(Spider):
    name = "habits"
    start_urls = [{leaf!r}]

    def start_requests(self):
        yield Request({leaf!r}, callback=self.product, cb_kwargs={{"n": 7, "tag": "x"}})
        yield Request({auth!r}, errback=self.failed, cb_kwargs={{"n": 8}}, meta={{"k": "v"}})

    def product(self, response, n, tag):
        self.logger.warning("item %s of %s", n, response.url)
        yield {{"n": n, "tag": tag, "again": response.cb_kwargs["n"], "meta": response.meta}}

    def failed(self, failure):
        request = failure.request
        seen = {{
            "reason": failure.reason, "error": failure.error, "status": failure.status,
            "url": request.url, "cb_kwargs": request.cb_kwargs, "meta": request.meta,
        }}
        with open("failed.json", "w") as f:
            json.dump(seen, f)
        yield {{"lost": True}}
"""


async def test_scrapy_habits__logger_cb_kwargs_and_errback(
    hostile_site: HostileSite, tmp_path: Path
) -> None:
    hostile_site.robots = "nodelay"
    leaf, auth = hostile_site.url("/leaf"), hostile_site.url("/auth/")  # /auth/: 401
    (tmp_path / "s.py").write_text(SCRAPY_HABITS.format(leaf=leaf, auth=auth))
    code, out, err = await crawlfleet(tmp_path, "crawl", "s.py", "-o", "-")
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == [
        {"n": 7, "tag": "x", "again": 7, "meta": {}}  # cb_kwargs are not meta
    ]
    assert f"item 7 of {leaf}" in err  # self.logger: the spider's warnings in crawl's output
    seen = json.loads((tmp_path / "failed.json").read_text())
    assert seen == {
        "reason": "http_4xx",
        "error": seen["error"],
        "status": 401,
        "url": auth,
        "cb_kwargs": {"n": 8},
        "meta": {"k": "v"},
    }
    assert seen["error"].startswith("HTTP 401")
    assert "errback failed of " + auth + " returned 1 items: an errback's output is not used" in err
