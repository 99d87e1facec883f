"""``response.follow_form`` against sample forms, with Scrapy's ``FormRequest.from_response``
as the oracle where the two promise the same (the same page through both, the same request)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from crawlfleet.errors import FormError
from crawlfleet.forms import multipart
from crawlfleet.response import Response
from crawlfleet.spider import Request

URL = "http://shop.test/account/login?next=/orders"

LOGIN = """<html><body>
<form id="search" action="/search" method="get"><input name="q" value="tea"></form>
<form id="login" name="login" action="/login" method="POST">
  <input type="hidden" name="csrf" value="t0k3n">
  <input type="hidden" name="__VIEWSTATE" value="dDwtMTA4MzE0MjEwNTs7Pg==">
  <input type="hidden" name="__EVENTVALIDATION" value="/wEWAgL+">
  <input name="user"> <input type="password" name="password" value="">
  <input type="checkbox" name="remember" value="yes" checked>
  <input type="checkbox" name="newsletter" value="yes">
  <input type="radio" name="plan" value="basic">
  <input type="radio" name="plan" value="pro" checked>
  <select name="lang"><option value="en">English<option value="fr" selected>Français</select>
  <select name="country"><option value="be">Belgium<option value="nl">Netherlands</select>
  <select name="tags" multiple><option selected>a<option>b<option selected>c</select>
  <textarea name="note">hello
there</textarea>
  <input type="submit" name="go" value="Sign in">
  <input type="submit" name="alt" value="Other">
  <button name="btn" value="b1">Button</button>
</form>
<form action="multi" method="post" enctype="multipart/form-data">
  <input type="hidden" name="token" value="x&quot;y"><input name="title" value="é">
</form>
</body></html>"""


def ours(page: str = LOGIN, *args: Any, **kwargs: Any) -> Request:
    return Response(
        URL, 200, {"content-type": "text/html; charset=utf-8"}, page.encode()
    ).follow_form(*args, **kwargs)


def scrapys(page: str = LOGIN, **kwargs: Any) -> Any:
    # Scrapy is the bench extras' (the oracle of the comparisons, not a dependency)
    from scrapy import http  # the oracle (the test command installs the bench extras)

    response = http.HtmlResponse(URL, body=page.encode(), encoding="utf-8")
    return http.FormRequest.from_response(response, **kwargs)


def pairs(request: Any) -> list[tuple[str, str]]:
    if request.method == "GET":
        return parse_qsl(urlsplit(request.url).query, keep_blank_values=True)
    body = request.body or b""
    return parse_qsl(body.decode(), keep_blank_values=True)


CASES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"formid": "login"}, {"formid": "login"}),
    ({"formname": "login"}, {"formname": "login"}),
    ({"selector_or_index": 1}, {"formnumber": 1}),
    ({"selector_or_index": "form#login"}, {"formcss": "form#login"}),
    ({"selector_or_index": 0}, {"formnumber": 0}),
    ({"formxpath": "//input[@name='user']"}, {"formxpath": "//input[@name='user']"}),
    (
        {"formid": "login", "formdata": {"user": "ann", "password": "s3cret", "remember": None}},
        {"formid": "login", "formdata": {"user": "ann", "password": "s3cret", "remember": None}},
    ),
    (
        {"formid": "login", "clickdata": {"name": "alt"}},
        {"formid": "login", "clickdata": {"name": "alt"}},
    ),
    ({"formid": "login", "dont_click": True}, {"formid": "login", "dont_click": True}),
    (
        {"formid": "login", "formdata": {"tags": ["x", "y"]}},
        {"formid": "login", "formdata": {"tags": ["x", "y"]}},
    ),
]


@pytest.mark.filterwarnings("ignore:FormRequest.from_response")
@pytest.mark.parametrize(("mine", "theirs"), CASES)
def test_follow_form__the_request_scrapy_builds(
    mine: dict[str, Any], theirs: dict[str, Any]
) -> None:
    got, want = ours(**mine), scrapys(**theirs)
    assert got.method == want.method
    assert pairs(got) == pairs(want)
    if got.method == "GET":
        assert got.url.split("?")[0] == want.url.split("?")[0]
    else:
        assert got.url == want.url
        assert got.headers == {"Content-Type": "application/x-www-form-urlencoded"}


def test_follow_form__hidden_fields_defaults_and_the_first_button_as_a_browser_sends() -> None:
    sent = pairs(ours(formid="login", formdata={"user": "ann"}))
    assert sent == [
        ("csrf", "t0k3n"),
        ("__VIEWSTATE", "dDwtMTA4MzE0MjEwNTs7Pg=="),
        ("__EVENTVALIDATION", "/wEWAgL+"),
        ("password", ""),
        ("remember", "yes"),
        ("plan", "pro"),
        ("lang", "fr"),
        ("country", "be"),  # no option selected: the first one
        ("tags", "a"),
        ("tags", "c"),
        ("note", "hello\nthere"),
        ("go", "Sign in"),
        ("user", "ann"),
    ]


def test_follow_form__clickdata_nr_counts_the_forms_submit_buttons() -> None:
    # (Scrapy's nr counts other elements too: it would send a hidden field here)
    assert pairs(ours(formid="login", clickdata={"nr": 2}))[-1] == ("btn", "b1")
    assert pairs(ours(formid="login", clickdata={"value": "Other"}))[-1] == ("alt", "Other")


def test_follow_form__get_replaces_the_query_and_action_resolves_against_the_page() -> None:
    got = ours(LOGIN, "#search")
    assert (got.method, got.url, got.body) == ("GET", "http://shop.test/search?q=tea", None)
    no_action = '<form method="get"><input name="a" value="1"></form>'
    assert ours(no_action).url == "http://shop.test/account/login?a=1"
    based = '<head><base href="http://cdn.test/x/"></head><form action="f"></form>'
    assert ours(based).url == "http://cdn.test/x/f"


def test_follow_form__the_callers_method_and_request_options_win() -> None:
    got = ours(LOGIN, "#search", method="POST", priority=3, meta={"k": 1}, headers={"X-A": "1"})
    assert (got.method, got.url, got.body) == ("POST", "http://shop.test/search", b"q=tea")
    assert (got.priority, got.meta) == (3, {"k": 1})
    assert got.headers == {"Content-Type": "application/x-www-form-urlencoded", "X-A": "1"}


def test_follow_form__a_selector_inside_a_form_picks_that_form() -> None:
    assert ours(LOGIN, "input[name=user]").url == "http://shop.test/login"


def test_follow_form__multipart_body_in_the_pages_encoding() -> None:
    got = ours(LOGIN, 2)
    assert got.method == "POST" and got.url == "http://shop.test/account/multi"
    body, content_type = multipart([("token", 'x"y'), ("title", "é")])
    assert got.headers == {"Content-Type": content_type}
    assert got.body == body
    boundary = content_type.split("boundary=")[1]
    assert body.startswith(f"--{boundary}\r\n".encode())
    assert b'name="token"\r\n\r\nx"y\r\n' in body
    assert "é".encode() in body and body.endswith(f"--{boundary}--\r\n".encode())
    assert ours(LOGIN, 2).body == body, "the same form, the same body (and fingerprint)"


def test_follow_form__image_button_sends_coordinates_and_disabled_controls_are_left_out() -> None:
    page = """<form method=post action=/x><input name=a value=1 disabled>
    <input name=b value=2><input type=image name=pic src=p.png></form>"""
    assert pairs(ours(page)) == [("b", "2"), ("pic.x", "0"), ("pic.y", "0")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"formid": "nope"}, "no form with id='nope' on http"),
        ({"formname": "nope"}, "no form with name='nope'"),
        ({"selector_or_index": 7}, "no form #7 (the page has 3)"),
        ({"selector_or_index": "form.missing"}, "no form matching 'form.missing'"),
        ({"selector_or_index": "p"}, "no form matching 'p'"),
        ({"formxpath": "//p"}, "no form matching XPath '//p'"),
        ({"formid": "login", "clickdata": {"name": "nope"}}, "no submit button with"),
        ({"formid": "login", "clickdata": {"nr": 9}}, "no submit button #9"),
    ],
)
def test_follow_form__no_such_form_is_a_form_error(kwargs: dict[str, Any], message: str) -> None:
    page = LOGIN.replace("<body>", "<body><p>hi</p>")
    with pytest.raises(FormError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ours(page, **kwargs)
    with pytest.raises(ValueError):  # a FormError is a ValueError too
        ours(page, **kwargs)


def test_request_form_and_headers() -> None:
    req = Request("http://a.test/s", form={"q": "é t", "tag": ["a", "b"]}, headers={"X-A": "1"})
    assert (req.method, req.body) == ("POST", b"q=%C3%A9+t&tag=a&tag=b")
    assert req.headers == {"X-A": "1", "Content-Type": "application/x-www-form-urlencoded"}
    get = Request("http://a.test/s?old=1#f", form={"q": "x"}, method="GET")
    assert (get.method, get.url, get.body) == ("GET", "http://a.test/s?q=x", None)
    secret = Request("http://a.test/", headers={"Authorization": "Bearer hunter2"})
    assert "hunter2" not in repr(secret)
    with pytest.raises(ValueError, match="not both"):
        Request("http://a.test/", form={"a": "1"}, body=b"x")
    with pytest.raises(ValueError, match="'Host' is the fetcher's"):
        Request("http://a.test/", headers={"Host": "evil.test"})
