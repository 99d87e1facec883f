"""custom_settings and -s: crawlfleet keys, spider attributes, Scrapy's names mapped or refused."""

from __future__ import annotations

from typing import Any

import pytest

from crawlfleet.config.custom_settings import split_custom_settings
from crawlfleet.errors import ConfigError, SpiderLoadError
from crawlfleet.spider import Spider
from crawlfleet.spiders import JOB_SETTINGS, SPIDER_ARGS, configure, spider_instance


@pytest.mark.parametrize(
    ("key", "value", "attributes", "settings"),
    [
        ("CONCURRENT_REQUESTS", 16, {}, {"worker.concurrency": 16}),
        ("CONCURRENT_REQUESTS_PER_DOMAIN", "4", {"domain_concurrency": 4}, {}),
        ("DOWNLOAD_DELAY", 0.5, {"domain_rate": 2.0}, {}),
        ("DOWNLOAD_DELAY", 0, {"domain_rate": None}, {}),
        ("DOWNLOAD_TIMEOUT", "15", {}, {"worker.fetch_timeout": 15.0}),
        ("DOWNLOAD_MAXSIZE", 1024, {}, {"worker.max_body": 1024}),
        ("ROBOTSTXT_OBEY", "False", {"obey_robots": False}, {}),
        ("USER_AGENT", "bot/1", {}, {"worker.user_agent": "bot/1"}),
        ("DEPTH_LIMIT", 3, {"max_depth": 3}, {}),
        ("DEPTH_LIMIT", 0, {"max_depth": None}, {}),  # Scrapy: 0 is no limit
        ("RETRY_TIMES", 2, {"max_attempts": 3}, {}),  # retries vs attempts
        ("RETRY_ENABLED", False, {"max_attempts": 1}, {}),
        ("RETRY_ENABLED", True, {}, {}),
        ("REDIRECT_MAX_TIMES", 3, {}, {"worker.max_redirects": 3}),
        ("obey_robots", "no", {"obey_robots": False}, {}),
        ("traps.max_depth", "false", {"max_depth": None}, {}),
        ("domain_rate", "2", {"domain_rate": 2.0}, {}),
        ("fetch_timeout", 9, {}, {"worker.fetch_timeout": 9}),
        ("store.raw", "elsewhere", {}, {"store.raw": "elsewhere"}),
    ],
)
def test_split__maps_each_key_to_a_setting_or_a_spider_attribute(
    key: str, value: Any, attributes: dict[str, Any], settings: dict[str, Any]
) -> None:
    split = split_custom_settings({key: value})
    assert (split.attributes, split.settings) == (attributes, settings)


@pytest.mark.parametrize(
    ("custom", "message"),
    [
        ({"CONCURRENT_REQUESTS_PER_IP": 2}, "no equivalent: politeness is per domain"),
        ({"ITEM_PIPELINES": {}}, "ITEM_PIPELINES is not supported"),
        ({"FEEDS": {}}, "use crawl -o FILE"),
        ({"LOG_LEVEL": "INFO"}, "use -v / -q"),
        ({"SOME_SCRAPY_THING": 1}, "unknown Scrapy setting SOME_SCRAPY_THING"),
        ({"DOWNLOAD_DELAY": -1}, "custom setting DOWNLOAD_DELAY: bad value -1"),
        ({"obey_robots": "maybe"}, "custom setting obey_robots: bad value 'maybe'"),
        ({"fetcher": "curl"}, "custom setting fetcher: bad value 'curl'"),
        ({"queue": "sqlite:///x.db"}, "queue is not a per-spider setting"),
        ({"control.port": 1}, "control.port is a fleet-wide setting"),
        ({"obey_robot": 1}, r"unknown setting 'obey_robot' \(did you mean 'obey_robots'"),
    ],
)
def test_split__refuses_with_the_reason_never_silently(
    custom: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        split_custom_settings(custom)


class Args(Spider):
    name = "args"
    start_urls = ["http://a.test/"]
    custom_settings = {"DOWNLOAD_DELAY": 0.25, "ROBOTSTXT_OBEY": False}

    def __init__(self, category: str = "all", **kw: Any) -> None:
        super().__init__(**kw)
        self.category = category


def test_configure__applies_arguments_settings_and_attributes_as_a_job_would() -> None:
    job = {SPIDER_ARGS: {"category": "toys", "extra": "1"}, JOB_SETTINGS: {"DEPTH_LIMIT": 4}}
    cls = configure(Args, job)
    assert (cls.domain_rate, cls.obey_robots, cls.max_depth) == (4.0, False, 4)
    assert cls.custom_settings == {
        "DOWNLOAD_DELAY": 0.25,
        "ROBOTSTXT_OBEY": False,
        "DEPTH_LIMIT": 4,
    }
    spider = cls()
    assert (spider.category, spider.extra) == ("toys", "1")  # type: ignore[attr-defined]
    assert Args().category == "all", "the spider class itself is untouched"


def test_spider_instance__a_spider_that_refuses_its_arguments_is_one_line() -> None:
    class NoArgs(Spider):
        name = "no-args"

        def __init__(self) -> None:
            super().__init__()

    with pytest.raises(SpiderLoadError, match=r"cannot be created with arguments \(x\)"):
        spider_instance(configure(NoArgs, {SPIDER_ARGS: {"x": "1"}}))
