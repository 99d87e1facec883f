"""HTML forms as a browser submits them: ``response.follow_form`` builds the ``Request``.

In the manner of Scrapy's ``FormRequest.from_response``: the form is found by a CSS selector,
an index, its ``name``/``id`` or an XPath (``formxpath``); its successful controls are sent as
a browser sends them (hidden fields such as CSRF tokens and ``__VIEWSTATE`` carried over, the
checked checkboxes and radio buttons, each ``<select>``'s selected options or its first one,
textareas; disabled controls and file inputs left out); ``formdata`` overrides fields by name
(``None`` removes one); the first submit button is clicked unless ``clickdata`` picks another
(by attributes, or ``{"nr": i}``) or ``dont_click=True``. The action is resolved against the
page's base URL (the page itself when the form has none); ``GET`` puts the fields in the query
string, ``POST`` in the body, URL-encoded in the page's encoding or ``multipart/form-data`` as
the form's ``enctype`` says.

The form is read from lxml's tree (parsel's): lxml knows forms as browsers do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode

from crawlfleet.errors import FormError, FormNotFound
from crawlfleet.request import FORM_URLENCODED, Callback, Field, Request, form_pairs, with_query
from crawlfleet.urls import join

if TYPE_CHECKING:
    from crawlfleet.request import FormData

__all__ = ["form_request"]

MULTIPART = "multipart/form-data"
# lxml ships no type stubs: its form elements are typed loosely here
FormElement = Any
HtmlElement = Any
_NOT_SENT = frozenset({"submit", "image", "reset", "button", "file"})
_CHECKABLE = frozenset({"checkbox", "radio"})
#: the HTML spec's whitespace, stripped from both ends of an action (as browsers and Scrapy do)
_HTML_SPACE = " \t\n\r\f"


class Page(Protocol):
    """The page a form is read from (a :class:`crawlfleet.response.Response`, which calls
    :func:`form_request` from ``follow_form``: this module sits below it)."""

    @property
    def url(self) -> str: ...
    @property
    def base_url(self) -> str: ...
    @property
    def encoding(self) -> str: ...
    def _document(self) -> Any: ...


_CLICKABLE = (
    "descendant::input[re:test(@type, '^(submit|image)$', 'i')]"
    "|descendant::button[not(@type) or re:test(@type, '^submit$', 'i')]"
)


def form_request(
    response: Page,
    selector_or_index: str | int | None = None,
    *,
    formdata: FormData | None = None,
    callback: Callback | None = None,
    clickdata: Mapping[str, Any] | None = None,
    dont_click: bool = False,
    formname: str | None = None,
    formid: str | None = None,
    formxpath: str | None = None,
    formnumber: int | None = None,
    formcss: str | None = None,
    url: str | None = None,
    **request_kwargs: Any,
) -> Request:
    """The ``Request`` submitting a form of ``response`` (see the module docstring).

    ``formnumber`` and ``formcss`` are Scrapy's names for an index and a CSS selector; ``url``
    replaces the form's action (joined against the page's base URL, as the action would be)."""
    which = selector_or_index
    if which is None:
        which = formcss if formcss is not None else formnumber
    form = _find_form(response, which, formname, formid, formxpath)
    overrides = _overrides(formdata, response.encoding)
    pairs: list[tuple[str, Field]] = [(k, v) for k, v in _values(form) if k not in overrides]
    if not dont_click:
        clicked = _clicked(form, clickdata)
        pairs.extend(p for p in clicked if p[0] not in overrides)
    pairs.extend((k, v) for k, values in overrides.items() for v in values)
    action = (form.get("action") or "").strip(_HTML_SPACE) if url is None else url
    url = join(response.base_url, action) if action else response.url
    # a method= of the caller's wins over the form's, as in Scrapy
    method = (request_kwargs.pop("method", None) or form.get("method") or "GET").strip().upper()
    if method != "POST":
        query = urlencode(pairs, encoding=response.encoding, errors="xmlcharrefreplace")
        return Request(with_query(url, query), callback, method="GET", **request_kwargs)
    enctype = (form.get("enctype") or FORM_URLENCODED).strip().lower()
    if enctype == MULTIPART:
        body, content_type = multipart(pairs, response.encoding)
    else:
        encoded = urlencode(pairs, encoding=response.encoding, errors="xmlcharrefreplace")
        body, content_type = encoded.encode("ascii"), FORM_URLENCODED
    headers = {"Content-Type": content_type, **(request_kwargs.pop("headers", None) or {})}
    return Request(url, callback, method="POST", body=body, headers=headers, **request_kwargs)


def _find_form(
    response: Page,
    which: str | int | None,
    formname: str | None,
    formid: str | None,
    formxpath: str | None,
) -> FormElement:
    root = response._document().parsel
    found: list[Any]
    if formxpath is not None:
        found = list(root.xpath(formxpath))
        what = f"form matching XPath {formxpath!r}"
        if found and found[0].root.tag != "form":
            found = list(found[0].xpath("ancestor-or-self::form"))
    elif formname is not None or formid is not None:
        # a name, else an id: both are the caller's own words for the form (Scrapy's order)
        asked = [("name", formname), ("id", formid)]
        found, what = [], ""
        for attr, value in asked:
            if value is None:
                continue
            found = list(root.xpath(f"//form[@{attr}=$value]", value=value))
            what = f"{what} nor " if what else what
            what += f"form with {attr}={value!r}"
            if found:
                break
    elif isinstance(which, str):
        found = list(root.css(which))
        what = f"form matching {which!r}"
        if found and found[0].root.tag != "form":  # a selector inside a form: its form
            found = list(found[0].xpath("ancestor-or-self::form"))
    else:
        forms = list(root.xpath("//form"))
        index = which or 0
        found = forms[index : index + 1] if -len(forms) <= index < len(forms) else []
        what = f"form #{index} (the page has {len(forms)})"
    if not found or found[0].root.tag != "form":
        raise FormNotFound(f"no {what} on {response.url}")
    form: FormElement = found[0].root
    return form


def _values(form: FormElement) -> list[tuple[str, str]]:
    """The form's successful controls, in document order, as a browser sends them (buttons
    apart: only the clicked one is sent)."""
    out: list[tuple[str, str]] = []
    for el in form.iter("input", "select", "textarea"):
        name = el.get("name")
        if not name or el.get("disabled") is not None:
            continue
        if el.tag == "textarea":
            out.append((name, "".join(el.itertext())))
        elif el.tag == "select":
            out.extend((name, value) for value in _selected(el))
        else:
            kind = (el.get("type") or "text").lower()
            if kind in _NOT_SENT or (kind in _CHECKABLE and el.get("checked") is None):
                continue
            out.append((name, el.get("value", "on" if kind in _CHECKABLE else "")))
    return out


def _selected(select: HtmlElement) -> list[str]:
    """A ``<select>``'s values: its selected options (a single select: the last selected, else
    the first option)."""
    options = [o for o in select.iter("option") if o.get("disabled") is None]
    chosen = [o for o in options if o.get("selected") is not None]
    if select.get("multiple") is None:
        chosen = chosen[-1:] or options[:1]
    return [o.get("value", " ".join(o.text_content().split())) for o in chosen]


def _overrides(formdata: FormData | None, encoding: str) -> dict[str, list[Field]]:
    """``formdata`` by name (a name given as bytes read in the page's encoding, to match the
    form's fields); a ``None`` value removes the field (no pairs). Values stay as given: bytes
    are sent as they are."""
    out: dict[str, list[Field]] = {}
    if formdata is None:
        return out
    try:
        items = list(formdata.items() if isinstance(formdata, Mapping) else formdata)
        removed = {_name(n, encoding) for n, v in items if v is None}
        pairs = form_pairs([(n, v) for n, v in items if v is not None])
    except (TypeError, ValueError):
        raise FormError(
            f"formdata must be a mapping or an iterable of (name, value) pairs, not {formdata!r}"
        ) from None
    for name in removed:
        out.setdefault(name, [])
    for key, value in pairs:
        out.setdefault(_name(key, encoding), []).append(value)
    return out


def _name(name: object, encoding: str) -> str:
    if isinstance(name, bytes):
        return name.decode(encoding, errors="replace")
    return str(name)


def _clicked(form: FormElement, clickdata: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The pairs the clicked submit button adds (none for an unnamed one)."""
    buttons: list[HtmlElement] = form.xpath(
        _CLICKABLE, namespaces={"re": "http://exslt.org/regular-expressions"}
    )
    buttons = [b for b in buttons if b.get("disabled") is None]
    if clickdata is None:
        if not buttons:
            return []
        button = buttons[0]
    elif "nr" in clickdata:
        nr = int(clickdata["nr"])
        if not 0 <= nr < len(buttons):
            raise FormError(f"no submit button #{nr} (the form has {len(buttons)})")
        button = buttons[nr]
    else:
        wanted = {str(k): str(v) for k, v in clickdata.items()}
        match = [b for b in buttons if all(b.get(k) == v for k, v in wanted.items())]
        if not match:
            raise FormError(f"no submit button with {wanted!r} in the form")
        if len(match) > 1:  # clicking the first of them would be a guess
            raise FormError(
                f"{len(match)} submit buttons match {wanted!r} in the form: name more of its "
                'attributes, or pick one by position ({"nr": i})'
            )
        button = match[0]
    name = button.get("name")
    if (button.get("type") or "").lower() == "image":  # the click's coordinates
        prefix = f"{name}." if name else ""
        return [(f"{prefix}x", "0"), (f"{prefix}y", "0")]
    return [(name, button.get("value") or "")] if name else []


def multipart(pairs: list[tuple[str, Field]], encoding: str = "utf-8") -> tuple[bytes, str]:
    """``pairs`` as a ``multipart/form-data`` body, and its ``Content-Type``. The boundary
    derives from the content, so the same form gives the same request (and fingerprint)."""
    digest = hashlib.sha1(repr(pairs).encode("utf-8", "surrogatepass"))  # noqa: S324
    boundary = f"----crawlfleet{digest.hexdigest()[:24]}"
    parts = []
    for name, value in pairs:
        quoted = name.replace("\\", "\\\\").replace('"', "%22").replace("\r\n", "%0D%0A")
        raw = value if isinstance(value, bytes) else value.encode(encoding, "xmlcharrefreplace")
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{quoted}"\r\n\r\n'.encode(
                encoding, "xmlcharrefreplace"
            )
            + raw
            + b"\r\n"
        )
    body = b"".join(parts) + f"--{boundary}--\r\n".encode("ascii")
    return body, f"{MULTIPART}; boundary={boundary}"
