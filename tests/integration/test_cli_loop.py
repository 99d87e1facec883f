"""The development loop from the command line: real subprocesses, real stores, the demo shop.

Each test crawls a small shop a few times, as someone iterating on a spider does: a finished job,
a fresh start, output files that follow their extension, spider arguments and settings, parse
errors that show, Ctrl-C, and the read-only commands.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from tests.conftest import PG_DSN
from tests.integration.helpers import CRAWLFLEET, demo_shop, read_jsonl, run, wait_for

from crawlfleet.demo.catalog import Catalog

pytestmark = pytest.mark.slow

SHOP = """\
from crawlfleet.demo.spider import DemoShop


class Shop(DemoShop):
    name = "shop"
    start_urls = [{start!r}]

    def __init__(self, category=None, **kw):
        super().__init__(**kw)
        self.category = category

    def parse(self, response):
        for obj in super().parse(response):
            if isinstance(obj, dict) and self.category and obj["category"] != self.category:
                continue
            yield obj
"""

NO_STORE = "error: no queue store at .crawlfleet/queue.db (nothing was crawled with it yet)"


def one_line(result: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def crawl(args: list[str], cwd: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    result = run(["crawl", *args], cwd, timeout=180)
    assert result.returncode == code, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    return result


def test_read_only_commands__never_create_a_store_and_say_which_they_looked_for(
    tmp_path: Path,
) -> None:
    for args in (
        ["status"],
        ["status", "--watch"],
        ["jobs"],
        ["jobs", "list"],
        ["jobs", "pause", "shop"],
        ["dead", "list"],
        ["dead", "show", "1"],
        ["dead", "replay", "--all"],
        ["export", "-o", "x.jsonl"],
        ["db", "upkeep"],
    ):
        assert one_line(run(args, tmp_path, timeout=60)) == NO_STORE, args
    assert not (tmp_path / ".crawlfleet").exists()
    missing = urlunsplit(urlsplit(PG_DSN)._replace(query="schema=nothing_here_at_all"))
    line = one_line(run(["status", "--queue", missing], tmp_path, timeout=60))
    assert line.startswith("error: no queue store in postgresql://")
    assert line.endswith("schema nothing_here_at_all (crawlfleet db upgrade creates one)")


def test_bad_job_names_and_unnamed_replays__one_line_errors(tmp_path: Path) -> None:
    assert "schema version" in run(["db", "upgrade"], tmp_path, timeout=60).stdout
    assert run(["db", "upkeep"], tmp_path, timeout=60).stdout.endswith(": nothing to do\n")
    for args, message in (
        (["status", "--job", "nope"], "error: no job named 'nope'"),
        (["jobs", "pause", "nope"], "error: no job named 'nope'"),
        (["dead", "list", "--job", "nope"], "error: no job named 'nope'"),
        (["dead", "replay"], "error: name the requests to replay: IDS, --job NAME, or --all"),
        (["dead", "list", "--reason", "bogus"], "error: unknown reason 'bogus'"),
        (["crawl", "x.py", "-o", "a.json", "-O", "b.json"], "error: -o and -O: choose one"),
        (["crowl", "x.py"], "Error: no such command 'crowl' (did you mean 'crawl'?)"),
        (["worker", "--kind", "ftp"], "error: --kind ftp: choose from http, impersonate, browser"),
    ):
        result = run(args, tmp_path, timeout=60)
        assert result.returncode == 2, args
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr


REFUSED = {
    "args.py": (
        "class S(Spider):\n    name = 's'\n    start_urls = ['http://127.0.0.1:1/']\n"
        "    def __init__(self):\n        super().__init__()\n",
        ["-a", "x=1"],
        "cannot be created with arguments (x)",
    ),
    "seeds.py": (
        "class S(Spider):\n    name = 's'\n"
        "    def start_requests(self):\n        raise KeyError('k')\n",
        [],
        "S.start_requests failed: KeyError: 'k'",
    ),
    "timeout.py": (
        "class S(Spider):\n    name = 's'\n    start_urls = ['http://127.0.0.1:1/']\n"
        "    custom_settings = {'DOWNLOAD_TIMEOUT': 90}\n",
        [],
        "spider s: lease_ttl (60s) is shorter than fetch_timeout (90s)",
    ),
    "scrapy.py": (
        "class S(Spider):\n    name = 's'\n    start_urls = ['http://127.0.0.1:1/']\n"
        "    custom_settings = {'AUTOTHROTTLE_ENABLED': True}\n",
        [],
        "Scrapy setting AUTOTHROTTLE_ENABLED is not supported: pacing is adaptive",
    ),
    "pools.py": (
        "class S(Spider):\n    name = 's'\n    start_urls = ['http://127.0.0.1:1/']\n"
        "    route_pools = ['nope']\n",
        [],
        "no route pool named 'nope'",
    ),
    "set.py": (
        "class S(Spider):\n    name = 's'\n    start_urls = ['http://127.0.0.1:1/']\n",
        ["-s", "ROBOTSTXT_OBEY=perhaps"],
        "custom setting ROBOTSTXT_OBEY: bad value 'perhaps'",
    ),
}


def test_crawl__a_spider_refused_at_start_leaves_no_job_and_no_worker(tmp_path: Path) -> None:
    run(["db", "upgrade"], tmp_path, timeout=60)
    for file, (body, args, message) in REFUSED.items():
        (tmp_path / file).write_text("from crawlfleet import Spider\n\n" + body)
        started = time.monotonic()
        line = one_line(run(["crawl", file, *args], tmp_path, timeout=60))
        assert message in line, line
        assert time.monotonic() - started < 10, "the waiting workers were not let go at once"
    assert run(["jobs"], tmp_path, timeout=60).stdout.strip() == "no jobs"
    assert workers_in(tmp_path) == [], "a worker outlived its refused crawl"


def workers_in(cwd: Path) -> list[int]:
    """Processes running ``crawlfleet worker`` in ``cwd``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            here = Path(proc, "cwd").resolve() == cwd.resolve()
            if here and b"worker" in Path(proc, "cmdline").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


def test_crawl__finished_then_nothing_to_do_then_fresh__outputs_follow_their_extension(
    tmp_path: Path,
) -> None:
    catalog = Catalog(40)
    kitchen = {r["sku"]: r for r in catalog.expected_records() if r["category"] == "kitchen"}
    everything = {r["sku"]: r for r in catalog.expected_records()}
    with demo_shop("--products", "40") as base:
        (tmp_path / "shop.py").write_text(SHOP.format(start=base + "/"))
        args = ["shop.py", "-w", "2", "-a", "category=kitchen", "-s", "DOWNLOAD_DELAY=0.002"]
        first = crawl([*args, "-O", "records.json"], tmp_path)
        assert "✓ shop finished" in first.stderr
        records = json.loads((tmp_path / "records.json").read_text())  # one valid JSON array
        assert {r["sku"]: r for r in records} == kitchen and len(records) == len(kitchen)
        with sqlite3.connect(tmp_path / ".crawlfleet" / "queue.db") as db:
            (min_delay,) = db.execute("SELECT min_delay FROM domains").fetchone()
        assert min_delay == pytest.approx(0.002), "DOWNLOAD_DELAY became the domain's pacing"

        status = run(["status"], tmp_path, timeout=60).stdout
        assert status.startswith("shop: finished ·")
        jobs = run(["jobs"], tmp_path, timeout=60).stdout.split("\t")
        assert jobs[:2] == ["shop", "finished"], "jobs agrees with status"
        watch = subprocess.Popen(
            [*CRAWLFLEET, "status", "--watch", "--every", "0.2"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert watch.stdout is not None
        frame = [watch.stdout.readline() for _ in range(2)]  # piped: each frame printed whole
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=30)
        assert watch.returncode == 0, err
        assert frame[0].startswith("crawlfleet status · ")
        assert frame[1].startswith("shop: finished ·")

        again = crawl([*args, "-o", "records.json"], tmp_path)
        assert "nothing to do: job shop finished at " in again.stderr
        assert "crawl --fresh starts it over" in again.stderr
        assert json.loads((tmp_path / "records.json").read_text()) == records, "nothing appended"

        fresh = crawl(["shop.py", "--fresh", "-o", "all.csv"], tmp_path)
        assert "fresh start: removed job shop's " in fresh.stderr
        assert "(WARC files are kept)" in fresh.stderr
        lines = (tmp_path / "all.csv").read_text().splitlines()
        assert lines[0] == "sku,name,price,category,in_stock"
        assert len(lines) - 1 == len(everything)

        piped = run(["crawl", "shop.py", "--fresh", "-o", "-", "-qq"], tmp_path, timeout=180)
        assert piped.returncode == 0, piped.stderr
        assert piped.stderr == ""
        assert {json.loads(x)["sku"] for x in piped.stdout.splitlines()} == set(everything)


def test_crawl__parse_errors_are_counted_and_fail_the_crawl_past_a_threshold(
    tmp_path: Path,
) -> None:
    with demo_shop("--products", "40") as base:
        (tmp_path / "broken.py").write_text(
            SHOP.format(start=base + "/") + "\n\nclass Broken(Shop):\n    name = 'broken'\n\n"
            "    def parse(self, response):\n"
            "        if '/product/' in response.url:\n"
            "            raise ValueError('no price here')\n"
            "        yield from super().parse(response)\n"
        )
        ref = "broken.py:Broken"
        loose = crawl([ref, "--max-error-rate", "0.99"], tmp_path)
        assert "✓ broken finished" in loose.stderr
        errors = next(x for x in loose.stderr.splitlines() if x.strip().startswith("errors"))
        n = int(errors.split()[1])
        assert n == 40, errors  # every product page
        assert "crawlfleet dead list --job broken --reason parse_error" in errors
        # what failed, where: the spider's own line, and how many pages it failed
        assert re.search(
            r"\n +ValueError: no price here at broken\.py:\d+ in parse \(40 pages, e\.g\. "
            + re.escape(base + "/product/"),
            loose.stderr,
        ), loose.stderr
        strict = crawl([ref, "--fresh", "--max-error-rate", "0.1"], tmp_path, code=1)
        assert "✗ broken failed: " in strict.stderr
        assert "of the pages failed in the spider (more than --max-error-rate 0.1)" in strict.stderr
        dead = run(["dead", "list", "--reason", "parse_error"], tmp_path, timeout=60).stdout
        assert len(dead.splitlines()) == 40 and "ValueError: no price here" in dead

        (tmp_path / "all_bad.py").write_text(
            "from crawlfleet import Spider\n\nclass Bad(Spider):\n    name = 'bad'\n"
            f"    start_urls = [{base + '/'!r}]\n\n    def parse(self, response):\n"
            "        yield {'n': 1 / 0}\n"
        )
        bad = crawl(["all_bad.py"], tmp_path, code=1)
        assert "✗ bad failed: every page (1) failed in the spider" in bad.stderr
        assert "pages      1 fetched" in bad.stderr  # it was fetched: the spider failed on it
        assert f"ZeroDivisionError: division by zero at all_bad.py:8 in parse (at {base}/)" in (
            bad.stderr
        )


def _records_in(db_path: Path, job: str) -> int:
    with sqlite3.connect(db_path) as db:
        return int(
            db.execute(
                "SELECT count(*) FROM records r JOIN jobs j ON j.id = r.job_id WHERE j.name = ?",
                (job,),
            ).fetchone()[0]
        )


def _leased(db_path: Path) -> int:
    with sqlite3.connect(db_path) as db:
        return int(db.execute("SELECT count(*) FROM requests WHERE state='leased'").fetchone()[0])


def _lines(path: Path) -> int:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return 0


def _interrupt(cwd: Path, output: Path, signals: int) -> subprocess.CompletedProcess[str]:
    """Start a crawl as a terminal would (its own process group), wait for records to stream
    into ``output``, then Ctrl-C it ``signals`` times: to the whole group, as a terminal does."""
    before = _lines(output)
    proc = subprocess.Popen(
        [*CRAWLFLEET, "crawl", "slow.py", "-w", "2", "-o", output.name],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(lambda: _lines(output) >= before + 20, 60, "records streaming to the output")
        for _ in range(signals):
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.05)
        out, err = proc.communicate(timeout=60)
        assert workers_in(cwd) == [], "a worker outlived the interrupted crawl"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c__once_drains_twice_kills__the_next_crawl_waits_and_the_output_is_whole(
    tmp_path: Path,
) -> None:
    catalog = Catalog(300)
    # leases long enough that the resumed crawl still finds the killed workers' leases held,
    # however long a loaded machine takes to start it
    (tmp_path / "crawlfleet.toml").write_text("[worker]\nlease_ttl = 10\nfetch_timeout = 3\n")
    db_path = tmp_path / ".crawlfleet" / "queue.db"
    out = tmp_path / "slow.jsonl"
    with demo_shop("--products", "300", "--slow", "1.0", "--slow-delay", "0.2") as base:
        (tmp_path / "slow.py").write_text(SHOP.format(start=base + "/").replace("shop", "slow"))

        drained = _interrupt(tmp_path, out, signals=1)
        assert drained.returncode == 130, drained.stderr[-3000:]
        assert "stopping: 2 workers finish the requests in flight" in drained.stderr
        assert "interrupted: slow stopped after" in drained.stderr
        assert "second stop signal" not in drained.stderr, "a worker saw the terminal's Ctrl-C"
        assert _leased(db_path) == 0, "a drained worker gave back what it did not finish"
        assert _lines(out) == _records_in(db_path, "slow"), "the output has what was stored"

        killed = _interrupt(tmp_path, out, signals=2)
        assert killed.returncode == 130, killed.stderr[-3000:]
        assert "exiting now: the workers' leases expire within 10s" in killed.stderr
        assert _leased(db_path) > 0, "killed workers leave their leases until they expire"

        resumed = run(["crawl", "slow.py", "-w", "2", "-o", out.name], tmp_path, timeout=180)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        waiting = next(x for x in resumed.stderr.splitlines() if x.startswith("waiting for"))
        assert " leases of job slow held by other workers (" in waiting
        assert "to expire: up to " in waiting
    skus = [r["sku"] for r in read_jsonl(out)]
    assert sorted(skus) == sorted(r["sku"] for r in catalog.expected_records()), (
        "three runs appended to one file: every record once"
    )


def test_sigterm_to_every_group_twice_at_once__the_stop_stays_graceful_and_resumes_whole(
    tmp_path: Path,
) -> None:
    """A supervisor that signals the process and its group (systemd's control-group, GNU
    ``timeout``) sends each process a SIGTERM beside the one ``crawl`` forwards: here twice
    to every group within milliseconds. It drains, as one SIGTERM does."""
    catalog = Catalog(150)
    (tmp_path / "crawlfleet.toml").write_text("[worker]\nlease_ttl = 30\nfetch_timeout = 3\n")
    db_path = tmp_path / ".crawlfleet" / "queue.db"
    out = tmp_path / "slow.jsonl"
    with demo_shop("--products", "150", "--slow", "1.0", "--slow-delay", "0.2") as base:
        (tmp_path / "slow.py").write_text(SHOP.format(start=base + "/").replace("shop", "slow"))
        proc = subprocess.Popen(
            [*CRAWLFLEET, "crawl", "slow.py", "-w", "2", "-o", out.name],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            wait_for(lambda: _lines(out) >= 10, 60, "records streaming to the output")
            groups = [proc.pid, *workers_in(tmp_path)]  # each worker leads a group of its own
            assert len(groups) == 3, groups
            for _ in range(2):
                for group in groups:
                    os.killpg(group, signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
            assert workers_in(tmp_path) == [], "a worker outlived the stopped crawl"
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        assert proc.returncode == 130, err[-3000:]
        assert "stopping: 2 workers finish the requests in flight" in err
        assert "exiting now" not in err and "second stop signal" not in err, err[-3000:]
        assert _leased(db_path) == 0, "no lease left held: the drain gave back what it did not end"
        assert _lines(out) == _records_in(db_path, "slow"), "the output has what was stored"

        resumed = run(["crawl", "slow.py", "-w", "2", "-o", out.name], tmp_path, timeout=180)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "waiting for" not in resumed.stderr, "no lease of the stopped crawl to wait for"
    skus = [r["sku"] for r in read_jsonl(out)]
    assert sorted(skus) == sorted(r["sku"] for r in catalog.expected_records()), (
        "two runs appended to one file: every record exactly once"
    )


@pytest.fixture
def pg_queue() -> Iterator[str]:
    schema = f"loop_{secrets.token_hex(4)}"
    try:
        yield urlunsplit(urlsplit(PG_DSN)._replace(query=f"schema={schema}"))
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_crawl_on_postgresql__records_stream_to_the_output_and_status_agrees(
    tmp_path: Path, pg_queue: str
) -> None:
    catalog = Catalog(40)
    with demo_shop("--products", "40") as base:
        (tmp_path / "shop.py").write_text(SHOP.format(start=base + "/"))
        crawl(["shop.py", "-w", "2", "--queue", pg_queue, "-O", "records.jsonl"], tmp_path)
    assert sorted(r["sku"] for r in read_jsonl(tmp_path / "records.jsonl")) == sorted(
        r["sku"] for r in catalog.expected_records()
    )
    jobs = run(["jobs", "--queue", pg_queue], tmp_path, timeout=60).stdout
    assert jobs.split("\t")[:2] == ["shop", "finished"]
    upkeep = run(["db", "upkeep", "--queue", pg_queue], tmp_path, timeout=60).stdout
    assert re.fullmatch(r"postgresql://\S+: (nothing to do|(analyze|vacuum) \w+(, .+)?)\n", upkeep)


def test_crawl_killed_hard__its_workers_drain_and_exit_instead_of_crawling_on(
    tmp_path: Path,
) -> None:
    db_path = tmp_path / ".crawlfleet" / "queue.db"
    with demo_shop("--products", "300", "--slow", "1.0", "--slow-delay", "0.2") as base:
        (tmp_path / "slow.py").write_text(SHOP.format(start=base + "/").replace("shop", "slow"))
        proc = subprocess.Popen(
            [*CRAWLFLEET, "crawl", "slow.py", "-w", "2", "-o", "slow.jsonl"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(lambda: _lines(tmp_path / "slow.jsonl") >= 10, 60, "the crawl under way")
        assert len(workers_in(tmp_path)) == 2
        proc.kill()  # the coordinator only: its workers see their stdin end
        proc.wait()
        wait_for(lambda: not workers_in(tmp_path), 30, "the orphaned workers to exit")
    assert _leased(db_path) == 0, "the workers drained: what they held went back to the queue"
    status = run(["status", "--json"], tmp_path, timeout=60)
    (job,) = json.loads(status.stdout)
    assert job["finished"] is False and job["queued"] > 0, "the crawl did not go on"
    assert (job["state"], job["progress"]) == ("running", "running")


def test_crawl_through_a_configured_proxy_pool__routes_reach_the_job_and_its_workers(
    tmp_path: Path,
) -> None:
    from tests.integration.helpers import shop_stats
    from tests.proxies import proxy_fleet

    catalog = Catalog(20)
    with proxy_fleet(tmp_path / "proxies", http=1, socks=0, auth=(0,)) as fleet:
        proxy = fleet.http[0]
        (tmp_path / "crawlfleet.toml").write_text(
            f"[[routes.pool]]\nname = 'px'\nproxies = [{proxy.url!r}]\n"
        )
        with demo_shop("--products", "20") as base:
            (tmp_path / "shop.py").write_text(
                SHOP.format(start=base + "/") + "    route_pools = ['px']\n"
            )
            result = crawl(["shop.py", "-O", "records.jsonl", "-v"], tmp_path)
            stats = shop_stats(base)
    clients, robots = stats["clients"], stats["paths"].get("/robots.txt", 0)
    # every page left through the proxy (robots.txt is the worker's own, over the direct route)
    assert clients[proxy.source] == stats["requests"] - robots, clients
    assert set(clients) <= {proxy.source, "127.0.0.1"}
    assert sorted(r["sku"] for r in read_jsonl(tmp_path / "records.jsonl")) == sorted(
        r["sku"] for r in catalog.expected_records()
    )
    assert proxy.password and proxy.password not in result.stderr + result.stdout
