"""Scrapy's ``FormRequest.from_response`` cases (its ``tests/test_http_request_form.py``: every
test that builds a request from a page, 59 of them), written here against
``response.follow_form``, each under the name of the Scrapy test it follows.

Where crawlfleet differs on purpose, the test asserts crawlfleet's documented behaviour and says
so (``DIFFERENT``); the README's "Forms and logins" lists the same differences:

* ``method=None`` means the form's own method (Scrapy sends the method ``NONE``);
* an image button that is clicked sends ``name.x=0&name.y=0``, as browsers do (Scrapy sends
  ``name=value``);
* a ``formname``/``formid`` that names no form raises ``FormError`` rather than submitting the
  page's first form instead (``formname`` falling back to a ``formid`` also given is kept);
* errors are ``FormError`` (a ``ValueError``; one naming a form that is not there is an
  ``IndexError`` too) with crawlfleet's own messages.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, unquote_to_bytes, urlsplit

import pytest

from crawlfleet.errors import FormError
from crawlfleet.response import Response
from crawlfleet.spider import Request


def page(body: bytes | str, url: str = "http://example.com", encoding: str = "utf-8") -> Response:
    raw = body.encode(encoding) if isinstance(body, str) else body
    return Response(url, 200, {"content-type": "text/html"}, raw, encoding=encoding)


def query(req: Request) -> bytes:
    return req.body or b"" if req.method == "POST" else urlsplit(req.url).query.encode()


def qs(req: Request) -> dict[bytes, list[bytes]]:
    return parse_qs(unquote_to_bytes(query(req)), True)


def qs_text(req: Request, encoding: str = "utf-8") -> dict[str, list[str]]:
    return parse_qs(unquote_to_bytes(query(req)).decode(encoding), True)


FORM_POST = """<form action="post.php" method="POST">
<input type="hidden" name="test" value="val1">
<input type="hidden" name="test" value="val2">
<input type="hidden" name="test2" value="xxx">
</form>"""


def _posted(req: Request) -> None:
    assert req.method == "POST"
    assert (req.headers or {})["Content-Type"] == "application/x-www-form-urlencoded"
    assert req.url == "http://www.example.com/this/post.php"


def test_from_response_post() -> None:
    res = page(FORM_POST, url="http://www.example.com/this/list.html")
    req = res.follow_form(formdata={"one": ["two", "three"], "six": "seven"})
    _posted(req)
    fs = qs(req)
    assert set(fs[b"test"]) == {b"val1", b"val2"}
    assert set(fs[b"one"]) == {b"two", b"three"}
    assert (fs[b"test2"], fs[b"six"]) == ([b"xxx"], [b"seven"])


@pytest.mark.parametrize(
    ("body", "encoding"),
    [
        (
            b'<form action="post.php" method="POST">'
            b'<input type="hidden" name="test \xc2\xa3" value="val1">'
            b'<input type="hidden" name="test \xc2\xa3" value="val2">'
            b'<input type="hidden" name="test2" value="xxx \xc2\xb5"></form>',
            "utf-8",
        ),
        (
            b'<form action="post.php" method="POST">'
            b'<input type="hidden" name="test \xa3" value="val1">'
            b'<input type="hidden" name="test \xa3" value="val2">'
            b'<input type="hidden" name="test2" value="xxx \xb5"></form>',
            "latin1",
        ),
        (
            '<form action="post.php" method="POST">'
            '<input type="hidden" name="test £" value="val1">'
            '<input type="hidden" name="test £" value="val2">'
            '<input type="hidden" name="test2" value="xxx µ"></form>',
            "utf-8",
        ),
    ],
    ids=[
        "test_from_response_post_nonascii_bytes_utf8",
        "test_from_response_post_nonascii_bytes_latin1",
        "test_from_response_post_nonascii_unicode",
    ],
)
def test_from_response_post_nonascii(body: bytes | str, encoding: str) -> None:
    res = page(body, url="http://www.example.com/this/list.html", encoding=encoding)
    req = res.follow_form(formdata={"one": ["two", "three"], "six": "seven"})
    _posted(req)
    fs = qs_text(req, encoding)
    assert set(fs["test £"]) == {"val1", "val2"}
    assert set(fs["one"]) == {"two", "three"}
    assert (fs["test2"], fs["six"]) == (["xxx µ"], ["seven"])


def test_from_response_duplicate_form_key() -> None:
    res = page("<form></form>", url="http://www.example.com")
    req = res.follow_form(method="GET", formdata=(("foo", "bar"), ("foo", "baz")))
    assert urlsplit(req.url).hostname == "www.example.com"
    assert urlsplit(req.url).query == "foo=bar&foo=baz"


HIDDEN_1_3 = """<form action="get.php" method="POST">
<input type="hidden" name="one" value="1">
<input type="hidden" name="two" value="3">
</form>"""


def test_from_response_override_duplicate_form_key() -> None:
    fs = qs(page(HIDDEN_1_3).follow_form(formdata=(("two", "2"), ("two", "4"))))
    assert (fs[b"one"], fs[b"two"]) == ([b"1"], [b"2", b"4"])


def test_from_response_extra_headers() -> None:
    req = page(FORM_POST).follow_form(
        formdata={"one": ["two", "three"], "six": "seven"},
        headers={"Accept-Encoding": "gzip,deflate"},
    )
    assert req.method == "POST"
    assert req.headers == {
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept-Encoding": "gzip,deflate",
    }


def test_from_response_get() -> None:
    res = page(FORM_POST.replace('"post.php" method="POST"', '"get.php" method="GET"'))
    res = page(res.body, url="http://www.example.com/this/list.html")
    req = res.follow_form(formdata={"one": ["two", "three"], "six": "seven"})
    assert req.method == "GET"
    assert (urlsplit(req.url).hostname, urlsplit(req.url).path) == (
        "www.example.com",
        "/this/get.php",
    )
    fs = qs(req)
    assert set(fs[b"test"]) == {b"val1", b"val2"}
    assert set(fs[b"one"]) == {b"two", b"three"}
    assert (fs[b"test2"], fs[b"six"]) == ([b"xxx"], [b"seven"])


def test_from_response_override_params() -> None:
    fs = qs(page(HIDDEN_1_3).follow_form(formdata={"two": "2"}))
    assert (fs[b"one"], fs[b"two"]) == ([b"1"], [b"2"])


def test_from_response_drop_params() -> None:
    fs = qs(page(HIDDEN_1_3).follow_form(formdata={"two": None}))
    assert fs[b"one"] == [b"1"]
    assert b"two" not in fs


APP = '<html><body><form action="/app"></form></body></html>'


def test_from_response_override_method() -> None:
    assert page(APP).follow_form().method == "GET"
    assert page(APP).follow_form(method="POST").method == "POST"
    # DIFFERENT: method=None is the form's method (Scrapy sends a method named "NONE")
    assert page(APP).follow_form(method=None).method == "GET"


def test_from_response_override_url() -> None:
    assert page(APP).follow_form().url == "http://example.com/app"
    assert page(APP).follow_form(url="http://foo.bar/absolute").url == "http://foo.bar/absolute"
    assert page(APP).follow_form(url="/relative").url == "http://example.com/relative"


CLICKABLES = """<form action="get.php" method="GET">
<input type="submit" name="clickable1" value="clicked1">
<input type="hidden" name="one" value="1">
<input type="hidden" name="two" value="3">
<input type="submit" name="clickable2" value="clicked2">
</form>"""


def test_from_response_case_insensitive() -> None:
    res = page(
        """<form action="get.php" method="GET">
        <input type="SuBmIt" name="clickable1" value="clicked1">
        <input type="iMaGe" name="i1" src="http://my.image.org/1.jpg">
        <input type="submit" name="clickable2" value="clicked2">
        </form>"""
    )
    fs = qs(res.follow_form())
    assert fs[b"clickable1"] == [b"clicked1"]
    assert b"i1" not in fs and b"clickable2" not in fs


def test_from_response_submit_first_clickable() -> None:
    fs = qs(page(CLICKABLES).follow_form(formdata={"two": "2"}))
    assert fs == {b"clickable1": [b"clicked1"], b"one": [b"1"], b"two": [b"2"]}


def test_from_response_submit_not_first_clickable() -> None:
    req = page(CLICKABLES).follow_form(formdata={"two": "2"}, clickdata={"name": "clickable2"})
    assert qs(req) == {b"clickable2": [b"clicked2"], b"one": [b"1"], b"two": [b"2"]}


def test_from_response_dont_submit_image_as_input() -> None:
    res = page(
        """<form><input type="hidden" name="i1" value="i1v">
        <input type="image" name="i2" src="http://my.image.org/1.jpg">
        <input type="submit" name="i3" value="i3v"></form>"""
    )
    assert qs(res.follow_form(dont_click=True)) == {b"i1": [b"i1v"]}


def test_from_response_dont_submit_reset_as_input() -> None:
    res = page(
        """<form><input type="hidden" name="i1" value="i1v">
        <input type="text" name="i2" value="i2v"><input type="reset" name="resetme">
        <input type="submit" name="i3" value="i3v"></form>"""
    )
    assert qs(res.follow_form(dont_click=True)) == {b"i1": [b"i1v"], b"i2": [b"i2v"]}


def test_from_response_clickdata_does_not_ignore_image() -> None:
    res = page(
        """<form><input type="text" name="i1" value="i1v">
        <input id="image" name="i2" type="image" value="i2v" alt="Login"
               src="http://my.image.org/1.jpg"></form>"""
    )
    # DIFFERENT: the image is clicked, and sends what a browser sends: the click's coordinates
    # (Scrapy sends i2=i2v)
    assert qs(res.follow_form()) == {b"i1": [b"i1v"], b"i2.x": [b"0"], b"i2.y": [b"0"]}


def test_from_response_multiple_clickdata() -> None:
    res = page(
        """<form action="get.php" method="GET">
        <input type="submit" name="clickable" value="clicked1">
        <input type="submit" name="clickable" value="clicked2">
        <input type="hidden" name="one" value="clicked1">
        <input type="hidden" name="two" value="clicked2"></form>"""
    )
    fs = qs(res.follow_form(clickdata={"name": "clickable", "value": "clicked2"}))
    assert fs == {b"clickable": [b"clicked2"], b"one": [b"clicked1"], b"two": [b"clicked2"]}


@pytest.mark.parametrize(
    ("other", "encoding"),
    [("\u20ac", "utf-8"), ("\u00a5", "latin1")],
    ids=["test_from_response_unicode_clickdata", "test_from_response_unicode_clickdata_latin1"],
)
def test_from_response_unicode_clickdata(other: str, encoding: str) -> None:
    res = page(
        f"""<form action="get.php" method="GET">
        <input type="submit" name="price in \u00a3" value="\u00a3 1000">
        <input type="submit" name="price in {other}" value="{other} 2000">
        <input type="hidden" name="poundsign" value="\u00a3">
        <input type="hidden" name="othersign" value="{other}"></form>""",
        encoding=encoding,
    )
    req = res.follow_form(clickdata={"name": f"price in {other}"})
    assert qs_text(req, encoding)[f"price in {other}"] == [f"{other} 2000"]


def test_from_response_multiple_forms_clickdata() -> None:
    res = page(
        """<form name="form1"><input type="submit" name="clickable" value="clicked1">
        <input type="hidden" name="field1" value="value1"></form>
        <form name="form2"><input type="submit" name="clickable" value="clicked2">
        <input type="hidden" name="field2" value="value2"></form>"""
    )
    fs = qs(res.follow_form(formname="form2", clickdata={"name": "clickable"}))
    assert fs == {b"clickable": [b"clicked2"], b"field2": [b"value2"]}


def test_from_response_override_clickable() -> None:
    res = page('<form><input type="submit" name="clickme" value="one"> </form>')
    req = res.follow_form(formdata={"clickme": "two"}, clickdata={"name": "clickme"})
    assert qs(req)[b"clickme"] == [b"two"]


def test_from_response_dont_click() -> None:
    fs = qs(page(CLICKABLES).follow_form(dont_click=True))
    assert b"clickable1" not in fs and b"clickable2" not in fs


def test_from_response_ambiguous_clickdata() -> None:
    with pytest.raises(ValueError, match=r"2 submit buttons match .*'type': 'submit'"):
        page(CLICKABLES).follow_form(clickdata={"type": "submit"})


def test_from_response_non_matching_clickdata() -> None:
    res = page('<form><input type="submit" name="clickable" value="clicked"></form>')
    with pytest.raises(ValueError, match="no submit button with"):
        res.follow_form(clickdata={"nonexistent": "notme"})


TWO_BUTTONS = """<form><input type="submit" name="clickable1" value="clicked1">
<input type="submit" name="clickable2" value="clicked2"></form>"""


def test_from_response_nr_index_clickdata() -> None:
    fs = qs(page(TWO_BUTTONS).follow_form(clickdata={"nr": 1}))
    assert b"clickable2" in fs and b"clickable1" not in fs


def test_from_response_invalid_nr_index_clickdata() -> None:
    res = page('<form><input type="submit" name="clickable" value="clicked"></form>')
    with pytest.raises(ValueError, match="no submit button #1"):
        res.follow_form(clickdata={"nr": 1})


def test_from_response_errors_noform() -> None:
    with pytest.raises(ValueError, match="no form #0"):
        page("<html></html>").follow_form()


def test_from_response_invalid_html5() -> None:
    res = page(
        '<!DOCTYPE html><body></html><form><input type="text" name="foo" value="xxx">'
        "</form></body></html>"
    )
    assert qs(res.follow_form(formdata={"bar": "buz"})) == {b"foo": [b"xxx"], b"bar": [b"buz"]}


def test_from_response_errors_formnumber() -> None:
    res = page(FORM_POST)
    with pytest.raises(IndexError):
        res.follow_form(1)
    with pytest.raises(IndexError):
        res.follow_form(formnumber=1)  # Scrapy's spelling


POST_1_2 = """<form action="post.php" method="POST">
<input type="hidden" name="one" value="1">
<input type="hidden" name="two" value="2">
</form>"""
FORM2_3_4 = """<form {attrs} action="post.php" method="POST">
<input type="hidden" name="three" value="3">
<input type="hidden" name="four" value="4">
</form>"""
NAMED = """<form {a}="form1" action="post.php" method="POST">
<input type="hidden" name="one" value="1"></form>
<form {a}="form2" action="post.php" method="POST">
<input type="hidden" name="two" value="2"></form>"""


def test_from_response_noformname() -> None:
    req = page(POST_1_2).follow_form(formdata={"two": "3"})
    assert (req.method, (req.headers or {})["Content-Type"]) == (
        "POST",
        "application/x-www-form-urlencoded",
    )
    assert qs(req) == {b"one": [b"1"], b"two": [b"3"]}


def test_from_response_formname_exists() -> None:
    req = page(POST_1_2 + FORM2_3_4.format(attrs='name="form2"')).follow_form(formname="form2")
    assert req.method == "POST"
    assert qs(req) == {b"four": [b"4"], b"three": [b"3"]}


def test_from_response_formname_nonexistent() -> None:
    # DIFFERENT: a name no form has is an error, not the page's first form submitted instead
    with pytest.raises(FormError, match="no form with name='form3'"):
        page(NAMED.format(a="name")).follow_form(formname="form3")


def test_from_response_formname_errors_formnumber() -> None:
    with pytest.raises(IndexError):
        page(NAMED.format(a="name")).follow_form(2, formname="form3")


def test_from_response_formid_exists() -> None:
    req = page(POST_1_2 + FORM2_3_4.format(attrs='id="form2"')).follow_form(formid="form2")
    assert req.method == "POST"
    assert qs(req) == {b"four": [b"4"], b"three": [b"3"]}


def test_from_response_formname_nonexistent_fallback_formid() -> None:
    res = page(POST_1_2 + FORM2_3_4.format(attrs='id="form2" name="form2"'))
    req = res.follow_form(formname="form3", formid="form2")
    assert req.method == "POST"
    assert qs(req) == {b"four": [b"4"], b"three": [b"3"]}


def test_from_response_formid_nonexistent() -> None:
    # DIFFERENT: an id no form has is an error, not the page's first form submitted instead
    with pytest.raises(FormError, match="no form with id='form3'"):
        page(NAMED.format(a="id")).follow_form(formid="form3")


def test_from_response_formid_errors_formnumber() -> None:
    with pytest.raises(IndexError):
        page(NAMED.format(a="id")).follow_form(2, formid="form3")


def test_from_response_select() -> None:
    res = page(
        """<form>
        <select name="i1"><option value="i1v1">option 1</option>
            <option value="i1v2" selected>option 2</option></select>
        <select name="i2"><option value="i2v1">option 1</option>
            <option value="i2v2">option 2</option></select>
        <select><option value="i3v1">option 1</option>
            <option value="i3v2">option 2</option></select>
        <select name="i4" multiple><option value="i4v1">option 1</option>
            <option value="i4v2" selected>option 2</option>
            <option value="i4v3" selected>option 3</option></select>
        <select name="i5" multiple><option value="i5v1">option 1</option>
            <option value="i5v2">option 2</option></select>
        <select name="i6"></select>
        <select name="i7"/>
        </form>"""
    )
    assert qs_text(res.follow_form()) == {"i1": ["i1v2"], "i2": ["i2v1"], "i4": ["i4v2", "i4v3"]}


@pytest.mark.parametrize(
    "kind", ["radio", "checkbox"], ids=["test_from_response_radio", "test_from_response_checkbox"]
)
def test_from_response_radio_and_checkbox(kind: str) -> None:
    res = page(
        f"""<form>
        <input type="{kind}" name="i1" value="i1v1">
        <input type="{kind}" name="i1" value="iv2" checked>
        <input type="{kind}" name="i2" checked>
        <input type="{kind}" name="i2">
        <input type="{kind}" name="i3" value="i3v1">
        <input type="{kind}" name="i3">
        <input type="{kind}" value="i4v1">
        <input type="{kind}">
        </form>"""
    )
    assert qs(res.follow_form()) == {b"i1": [b"iv2"], b"i2": [b"on"]}


def test_from_response_input_text() -> None:
    res = page(
        """<form><input type="text" name="i1" value="i1v1"><input type="text" name="i2">
        <input type="text" value="i3v1"><input type="text"><input name="i4" value="i4v1">
        </form>"""
    )
    assert qs(res.follow_form()) == {b"i1": [b"i1v1"], b"i2": [b""], b"i4": [b"i4v1"]}


def test_from_response_input_hidden() -> None:
    res = page(
        """<form><input type="hidden" name="i1" value="i1v1"><input type="hidden" name="i2">
        <input type="hidden" value="i3v1"><input type="hidden"></form>"""
    )
    assert qs(res.follow_form()) == {b"i1": [b"i1v1"], b"i2": [b""]}


def test_from_response_input_textarea() -> None:
    res = page(
        """<form><textarea name="i1">i1v</textarea><textarea name="i2"></textarea>
        <textarea name="i3"/>
        <textarea>i4v</textarea></form>"""
    )
    assert qs(res.follow_form()) == {b"i1": [b"i1v"], b"i2": [b""], b"i3": [b""]}


def test_from_response_descendants() -> None:
    res = page(
        """<form><div><fieldset><input type="text" name="i1">
        <select name="i2"><option value="v1" selected></select></fieldset>
        <input type="radio" name="i3" value="i3v2" checked>
        <input type="checkbox" name="i4" value="i4v2" checked>
        <textarea name="i5"></textarea><input type="hidden" name="h1" value="h1v"></div>
        <input type="hidden" name="h2" value="h2v"></form>"""
    )
    assert set(qs(res.follow_form())) == {b"h2", b"i2", b"i1", b"i3", b"h1", b"i5", b"i4"}


TWO_FORMS = POST_1_2 + FORM2_3_4.format(attrs="").replace('"post.php"', '"post2.php"')


def test_from_response_xpath() -> None:
    res = page(TWO_FORMS)
    assert qs(res.follow_form(formxpath="//form[@action='post.php']"))[b"one"] == [b"1"]
    assert qs(res.follow_form(formxpath="//form/input[@name='four']"))[b"three"] == [b"3"]
    with pytest.raises(ValueError, match="no form matching XPath"):
        res.follow_form(formxpath="//form/input[@name='abc']")


def test_from_response_unicode_xpath() -> None:
    res = page(b'<form name="\xd1\x8a"></form>')
    assert not qs(res.follow_form(formxpath="//form[@name='\u044a']"))
    xpath = "//form[@name='\u03b1']"
    with pytest.raises(ValueError, match=xpath.replace("[", r"\[")):
        res.follow_form(formxpath=xpath)


@pytest.mark.parametrize(
    ("button", "value"),
    [
        ('<button type="submit" name="button1" value="submit1">Submit</button>', b"submit1"),
        ('<button name="button1" value="submit1">Submit</button>', b"submit1"),
        ('<input type="submit" name="button1">Submit</button>', b""),
        ('<button type="submit" name="button1">Submit</button>', b""),
    ],
    ids=[
        "test_from_response_button_submit",
        "test_from_response_button_notype",
        "test_from_response_submit_novalue",
        "test_from_response_button_novalue",
    ],
)
def test_from_response_buttons(button: str, value: bytes) -> None:
    res = page(
        f"""<form action="post.php" method="POST">
        <input type="hidden" name="test1" value="val1">
        <input type="hidden" name="test2" value="val2">{button}</form>""",
        url="http://www.example.com/this/list.html",
    )
    req = res.follow_form()
    _posted(req)
    assert qs(req) == {b"test1": [b"val1"], b"test2": [b"val2"], b"button1": [value]}


def test_html_base_form_action() -> None:
    res = page(
        """<html><head><base href=" http://b.com/"></head>
        <body><form action="test_form"></form></body></html>""",
        url="http://a.com/",
    )
    assert res.follow_form().url == "http://b.com/test_form"


def test_spaces_in_action() -> None:
    res = page('<body><form action=" path\n"></form></body>')
    assert res.follow_form().url == "http://example.com/path"


def test_from_response_css() -> None:
    res = page(TWO_FORMS)
    assert qs(res.follow_form("form[action='post.php']"))[b"one"] == [b"1"]
    assert qs(res.follow_form("input[name='four']"))[b"three"] == [b"3"]
    assert qs(res.follow_form(formcss="input[name='four']"))[b"three"] == [b"3"]  # Scrapy's name
    with pytest.raises(ValueError, match="no form matching"):
        res.follow_form("input[name='abc']")


@pytest.mark.parametrize(
    ("method", "expected"), [("GET", "GET"), ("POST", "POST"), ("post", "POST"), ("UNKNOWN", "GET")]
)
def test_from_response_valid_form_methods(method: str, expected: str) -> None:
    res = page(
        f'<form action="post.php" method="{method}"><input type="hidden" name="one" value="1">'
        "</form>"
    )
    assert res.follow_form().method == expected


SUBMIT = """<html><body><form action="/submit" method="post">
<input type="text" name="test" value="value"></form></body></html>"""


@pytest.mark.parametrize(
    "formdata",
    [123, ("a",)],
    ids=[
        "test_form_response_with_invalid_formdata_type_error",
        "test_form_response_with_custom_invalid_formdata_value_error",
    ],
)
def test_form_response_with_invalid_formdata(formdata: Any) -> None:
    with pytest.raises(ValueError, match=r"formdata must be a mapping or .*pairs"):
        page(SUBMIT).follow_form(formdata=formdata)


def test_get_form_with_xpath_no_form_parent() -> None:
    res = page(
        """<html><body><div id="outside-form"><p>This paragraph is not inside a form.</p></div>
        <form action="/submit" method="post"><input type="text" name="inside-form" value="">
        </form></body></html>"""
    )
    with pytest.raises(ValueError, match="no form matching XPath"):
        res.follow_form(formxpath='//div[@id="outside-form"]/p')


# Bytes, as Scrapy takes them: sent as they are, never as their repr (b'...').


def test_bytes_in_formdata_are_sent_as_bytes() -> None:
    req = page(HIDDEN_1_3).follow_form(formdata={b"two": b"\xc2\xa3 2", "three": b"x"})
    assert sorted(query(req).split(b"&")) == [b"one=1", b"three=x", b"two=%C2%A3+2"]


def test_bytes_in_a_request_form_are_sent_as_bytes() -> None:
    req = Request("http://www.example.com", form={b"one": b"two", "price": b"\xc2\xa3 100"})
    assert sorted((req.body or b"").split(b"&")) == [b"one=two", b"price=%C2%A3+100"]
    get = Request("http://www.example.com/?a=0", method="GET", form=[("a", b"\xb5")])
    assert get.url == "http://www.example.com/?a=%B5"


def test_bytes_in_a_multipart_form_are_sent_as_they_are() -> None:
    res = page('<form action="/up" method="post" enctype="multipart/form-data"></form>')
    req = res.follow_form(formdata={"raw": b"\xff\x00"})
    assert b'name="raw"\r\n\r\n\xff\x00\r\n' in (req.body or b"")
