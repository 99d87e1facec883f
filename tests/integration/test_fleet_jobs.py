"""Fleet operations: schema upgrade, job states, workers finding spiders by name."""

from __future__ import annotations

import json
import secrets
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import click
import psycopg
import pytest
from click.testing import CliRunner
from tests.conftest import PG_DSN
from tests.integration.helpers import demo_shop, run, start

from crawlfleet.cli import main
from crawlfleet.demo.catalog import Catalog
from crawlfleet.errors import SpiderLoadError
from crawlfleet.frontier.postgres import SCHEMA_VERSION as PG_VERSION
from crawlfleet.frontier.sqlite import SCHEMA_VERSION as SQLITE_VERSION
from crawlfleet.spiders import find_spider

SPIDER = """\
from crawlfleet.demo.spider import DemoShop


class {cls}(DemoShop):
    name = {name!r}
    start_urls = [{start!r}]
"""


@pytest.fixture
def pg_queue() -> Iterator[str]:
    """A queue URL with a schema of its own, dropped after the test."""
    schema = f"fleet_{secrets.token_hex(4)}"
    try:
        yield urlunsplit(urlsplit(PG_DSN)._replace(query=f"schema={schema}"))
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def status(queue: str, cwd: Path) -> dict[str, dict[str, Any]]:
    result = run(["status", "--queue", queue, "--json"], cwd, timeout=60)
    assert result.returncode == 0, result.stderr
    return {s["job"]: s for s in json.loads(result.stdout)}


def ok(args: list[str], cwd: Path) -> str:
    result = run(args, cwd, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# -- finding spiders ------------------------------------------------------------------------------


def test_find_spider__by_name_in_a_directory_or_a_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spiders = tmp_path / "spiders"
    spiders.mkdir()
    for file, cls, name in [("a.py", "A", "alpha"), ("b.py", "B", "beta")]:
        (spiders / file).write_text(SPIDER.format(cls=cls, name=name, start="http://a.test/"))
    (spiders / "broken.py").write_text("raise RuntimeError('boom')\n")
    assert find_spider("alpha", str(spiders)).name == "alpha"
    assert find_spider("beta", str(spiders)).__name__ == "B"
    with pytest.raises(SpiderLoadError, match=r"no spider named 'gamma' in .*spiders.*broken\.py"):
        find_spider("gamma", str(spiders))
    (spiders / "c.py").write_text(SPIDER.format(cls="C", name="alpha", start="http://c.test/"))
    with pytest.raises(SpiderLoadError, match="several spiders named 'alpha'"):
        find_spider("alpha", str(spiders))

    package = f"fleet_spiders_{secrets.token_hex(3)}"
    (tmp_path / package / "shops").mkdir(parents=True)
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "shops" / "__init__.py").write_text("")
    (tmp_path / package / "shops" / "shop.py").write_text(
        SPIDER.format(cls="Shop", name="deep", start="http://d.test/")
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert find_spider("deep", package).__module__ == f"{package}.shops.shop"
        with pytest.raises(SpiderLoadError, match=f"no spider named 'nope' in {package}"):
            find_spider("nope", package)
    finally:
        for name in [m for m in sys.modules if m.startswith(package)]:
            del sys.modules[name]
    with pytest.raises(SpiderLoadError, match="cannot import spider module"):
        find_spider("x", "no_such_package_here")


# -- workers and spiders --------------------------------------------------------------------------


@pytest.mark.slow
def test_worker__job_whose_spider_it_cannot_load__reported_once_other_jobs_run(
    tmp_path: Path, pg_queue: str
) -> None:
    submitted, fleet = tmp_path / "laptop", tmp_path / "fleet-spiders"
    submitted.mkdir()
    fleet.mkdir()
    with demo_shop("--products", "60") as base:
        for name in ("here", "elsewhere"):
            src = SPIDER.format(cls="Shop", name=f"shop-{name}", start=base + "/")
            (submitted / f"{name}.py").write_text(src)
            ok(["submit", str(submitted / f"{name}.py"), "--queue", pg_queue], tmp_path)
        # the fleet machine has only one of the two spiders, in a file of another name
        (fleet / "spiders_we_run.py").write_text((submitted / "here.py").read_text())
        for path in submitted.iterdir():
            path.unlink()  # the stored paths exist on the submitting machine only
        result = run(
            ["worker", "--queue", pg_queue, "--spiders", str(fleet), "--exit-when-finished"],
            tmp_path,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [line for line in result.stderr.splitlines() if "cannot run job" in line]
    assert len(reports) == 1, result.stderr[-3000:]
    assert (
        f"cannot run job shop-elsewhere here: no spider named 'shop-elsewhere' in {fleet}"
        in (reports[0])
    )
    jobs = status(pg_queue, tmp_path)
    assert jobs["shop-here"]["finished"] is True
    assert jobs["shop-here"]["progress"] == "finished"
    assert jobs["shop-here"]["records"] == len(Catalog(60).expected_records())
    assert jobs["shop-elsewhere"]["finished"] is False
    assert (jobs["shop-elsewhere"]["queued"], jobs["shop-elsewhere"]["done"]) == (1, 0)
    with psycopg.connect(PG_DSN) as conn:
        schema = urlsplit(pg_queue).query.removeprefix("schema=")
        attempts = conn.execute(
            f'SELECT r.attempts FROM "{schema}".requests r JOIN "{schema}".jobs j'
            " ON j.id = r.job_id WHERE j.name = 'shop-elsewhere'"
        ).fetchall()
    assert attempts == [(0,)], "a lease of the unloadable job was given back, not counted"


# -- job states -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_db_upgrade__creates_the_schema_and_reports_its_version(
    tmp_path: Path, pg_queue: str
) -> None:
    for _ in range(2):  # a second run finds nothing to do
        assert f"schema version {PG_VERSION}" in ok(
            ["db", "upgrade", "--queue", pg_queue], tmp_path
        )
    out = ok(["db", "upgrade", "--queue", f"sqlite:///{tmp_path / 'q.db'}"], tmp_path)
    assert f"schema version {SQLITE_VERSION}" in out
    assert (tmp_path / "q.db").exists()
    assert "no jobs" in ok(["jobs", "--queue", pg_queue], tmp_path)


@pytest.mark.slow
def test_jobs_pause_resume_cancel__leasing_and_finished_follow_the_state(
    tmp_path: Path, pg_queue: str
) -> None:
    with demo_shop("--products", "40") as base:
        spider = tmp_path / "shop.py"
        spider.write_text(SPIDER.format(cls="Shop", name="shop", start=base + "/"))
        for job in ("keep", "drop"):
            ok(["submit", str(spider), "--queue", pg_queue, "--job", job], tmp_path)
        assert "job keep: paused (was running)" in ok(
            ["jobs", "pause", "keep", "--queue", pg_queue], tmp_path
        )
        ok(["jobs", "--queue", pg_queue, "cancel", "drop"], tmp_path)  # group option works too
        listing = ok(["jobs", "list", "--queue", pg_queue], tmp_path)
        assert [line.split("\t")[:2] for line in listing.splitlines()] == [
            ["keep", "paused"],
            ["drop", "cancelled"],
        ]
        worker = start(["worker", "--queue", pg_queue, "--exit-when-finished"], tmp_path)
        try:
            time.sleep(3)  # long enough for many lease rounds
            assert worker.poll() is None, "a paused job is not finished: the worker waits"
            jobs = status(pg_queue, tmp_path)
            assert jobs["keep"]["done"] == jobs["drop"]["done"] == 0
            assert jobs["keep"]["finished"] is False and jobs["drop"]["finished"] is True
            ok(["jobs", "resume", "keep", "--queue", pg_queue], tmp_path)
            _, err = worker.communicate(timeout=120)
            assert worker.returncode == 0, err[-3000:]
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.communicate()
    jobs = status(pg_queue, tmp_path)
    assert jobs["keep"]["finished"] is True
    assert jobs["keep"]["records"] == len(Catalog(40).expected_records())
    assert (jobs["drop"]["state"], jobs["drop"]["finished"]) == ("cancelled", True)
    assert jobs["drop"]["progress"] == "cancelled"
    assert (jobs["drop"]["queued"], jobs["drop"]["done"]) == (1, 0), "queued requests stay"
    text = ok(["status", "--queue", pg_queue], tmp_path)
    assert "keep: finished ·" in text
    assert "drop: cancelled ·" in text
    result = run(["jobs", "resume", "nope", "--queue", pg_queue], tmp_path, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: no job named 'nope'"


@pytest.mark.parametrize("where", ["no/such/dir", "no_such_spider_package"])
def test_worker__spiders_that_do_not_exist__one_line_error(tmp_path: Path, where: str) -> None:
    result = run(["worker", "--spiders", where], tmp_path, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: --spiders {where}: no such directory or importable module"
    )


def test_every_command_has_help() -> None:
    def walk(group: click.Group, path: list[str]) -> Iterator[list[str]]:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            yield [*path, name]
            if isinstance(command, click.Group):
                yield from walk(command, [*path, name])

    runner = CliRunner()
    commands = list(walk(main, []))
    assert ["db", "upgrade"] in commands and ["jobs", "cancel"] in commands
    for path in commands:
        result = runner.invoke(main, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        _, _, rest = result.output.partition("\n\n")
        assert rest.strip() and not rest.startswith("Options:"), f"{path} has no help text"
