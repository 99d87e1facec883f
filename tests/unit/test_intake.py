"""Intake: what a job's seeds look like in the store, and what is refused before a job exists."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from crawlfleet.data.validate import record_validator
from crawlfleet.errors import SpiderLoadError, UsageError
from crawlfleet.intake import seed_requests
from crawlfleet.spider import Request, Spider
from crawlfleet.urls import credentials_by_origin, fingerprint
from crawlfleet.worker.extract import basic_authorization

START = ["http://bot:s%3Acret@shop.test:8080/a?sessionid=9", "http://shop.test/b"]


def test_seeds__stored_without_credentials__session_ids_kept_in_the_url_only() -> None:
    seeds = seed_requests([Request(u) for u in START], credentials=credentials_by_origin(START))
    assert [s.url for s in seeds] == ["http://shop.test:8080/a?sessionid=9", "http://shop.test/b"]
    assert seeds[0].fingerprint == fingerprint("http://shop.test:8080/a")
    assert all("s%3Acret" not in repr(s) and "s:cret" not in repr(s) for s in seeds)


def test_seed_with_credentials_not_from_start_urls__refused_masked() -> None:
    with pytest.raises(UsageError, match="taken from the spider's start_urls") as refused:
        seed_requests([Request("http://bot:other@shop.test:8080/")], credentials={})
    assert "other" not in str(refused.value)


def test_basic_authorization() -> None:
    (user, password) = credentials_by_origin(START)["http://shop.test:8080"]
    assert (user, password) == ("bot", "s:cret")
    assert basic_authorization(user, password) == "Basic Ym90OnM6Y3JldA=="


class Item(BaseModel):
    sku: str


@pytest.mark.parametrize(
    ("item_key", "message"),
    [("skew", "'skew' is not a field of Item"), (("sku", 5), "item_key must be a field name")],
)
def test_bad_item_key__refused_in_one_line(item_key: object, message: str) -> None:
    spider = type("Shop", (Spider,), {"name": "shop", "item": Item, "item_key": item_key})
    with pytest.raises(SpiderLoadError, match=message) as refused:
        record_validator(spider)
    assert str(refused.value).startswith("spider Shop: ")
    assert "\n" not in str(refused.value)
