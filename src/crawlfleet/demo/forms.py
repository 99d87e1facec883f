"""The shop's forms: a login with a CSRF token, an account's orders, a two-step ViewState search.

* ``GET /login``: a login form whose hidden ``csrf_token`` is tied to a signed (HMAC) session
  cookie, set with the form. ``POST /login`` needs both (a missing or wrong token, or no valid
  cookie, is a plain-text 403) and the demo's credentials (:data:`USERNAME` / :data:`PASSWORD`);
  it answers with a new cookie for the signed-in session and a 303 to ``/account/orders``.
* ``/account/orders`` (paginated) and ``/account/orders/{id}``: a signed-in session's orders and
  their details (a 403 otherwise). :func:`expected_orders` is what a crawl of them must yield.
* ``/search-vs``: an ASP.NET-style search in two postbacks. The first form has ``__VIEWSTATE``
  and ``__EVENTVALIDATION`` and a category list; posting it gives the second form (new state,
  sort and stock options), whose postback gives the category's products. A missing, tampered or
  stale ``__VIEWSTATE`` (another step's), or a value ``__EVENTVALIDATION`` did not offer, gets
  ASP.NET's error page (a 400).

Tokens are signed with a key made when the app is; nothing is kept server-side.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from html import escape
from typing import Any

from aiohttp import web

from crawlfleet.demo.catalog import Catalog

__all__ = ["PASSWORD", "USERNAME", "expected_orders", "expected_search", "register"]

USERNAME = "demo"
PASSWORD = "demo-password"  # noqa: S105 - the demo shop's published credentials
COOKIE = "shop_session"
ORDERS = 14
ORDERS_PER_PAGE = 5
CATEGORY_FIELD = "ctl00$Main$ddlCategory"
SORT_FIELD = "ctl00$Main$ddlSort"
STOCK_FIELD = "ctl00$Main$chkInStock"
KEY = web.AppKey("forms_key", bytes)
CATALOG = web.AppKey("forms_catalog", Catalog)


def register(app: web.Application, catalog: Catalog) -> None:
    """Add the forms' routes to the shop ``app``."""
    app[KEY] = secrets.token_bytes(32)
    app[CATALOG] = catalog
    app.router.add_get("/login", _login_form)
    app.router.add_post("/login", _login)
    app.router.add_get("/account/orders", _orders)
    app.router.add_get("/account/orders/{order}", _order)
    app.router.add_get("/search-vs", _search_form)
    app.router.add_post("/search-vs", _search_postback)


# -- the data ------------------------------------------------------------------------------------


def orders(catalog: Catalog) -> list[dict[str, Any]]:
    """The demo user's orders (deterministic for a catalog): id, date, skus, total."""
    priced = [p for p in catalog.products if p.valid and p.price is not None]
    out = []
    for i in range(ORDERS):
        items = [priced[(i * 7 + k * 3) % len(priced)] for k in range(1 + i % 3)]
        out.append(
            {
                "order": f"ORD-{1001 + i}",
                "date": f"2025-{1 + i % 12:02d}-{1 + (i * 5) % 28:02d}",
                "skus": [p.sku for p in items],
                "total": round(sum(p.price or 0.0 for p in items), 2),
            }
        )
    return out


def expected_orders(catalog: Catalog) -> list[dict[str, Any]]:
    """The records a crawl of the orders must yield (one per order)."""
    return orders(catalog)


def expected_search(catalog: Catalog, slug: str, in_stock_only: bool = False) -> list[str]:
    """The skus the ViewState search lists for category ``slug``."""
    return [p.sku for p in catalog.in_category(slug) if p.in_stock or not in_stock_only]


# -- signing -------------------------------------------------------------------------------------


def _sign(key: bytes, data: dict[str, Any]) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(data, sort_keys=True).encode()).decode()
    mac = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    return f"{payload}.{mac}"


def _verify(key: bytes, token: str | None) -> dict[str, Any] | None:
    """The data of a token :func:`_sign` made with ``key``; None for anything else."""
    if not token or "." not in token:
        return None
    payload, mac = token.rsplit(".", 1)
    want = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, want):
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(payload.encode()))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


# -- pages ---------------------------------------------------------------------------------------


def _page(title: str, body: str, status: int = 200) -> web.Response:
    html = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} | Crawlfleet Demo Shop</title></head><body>"
        '<header><form class="site-search" action="/search" method="get">'
        '<input name="q" placeholder="Search"><button>Go</button></form></header>'
        f"<main><h1>{escape(title)}</h1>{body}</main></body></html>"
    )
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")


def _forbidden(why: str) -> web.Response:
    return web.Response(status=403, text=f"403 Forbidden: {why}")


def _session(request: web.Request) -> dict[str, Any] | None:
    return _verify(request.app[KEY], request.cookies.get(COOKIE))


def _set_session(response: web.StreamResponse, key: bytes, data: dict[str, Any]) -> None:
    response.set_cookie(COOKIE, _sign(key, data), path="/", httponly=True, samesite="Lax")


async def _login_form(request: web.Request) -> web.StreamResponse:
    session = _session(request)
    fresh = session is None
    if session is None:
        session = {"sid": secrets.token_hex(8), "csrf": secrets.token_urlsafe(16), "user": None}
    body = (
        '<form id="login" class="login" action="/login" method="post">'
        f'<input type="hidden" name="csrf_token" value="{escape(session["csrf"])}">'
        '<label>User <input name="username" autocomplete="username"></label>'
        '<label>Password <input type="password" name="password"></label>'
        '<label><input type="checkbox" name="remember" value="1" checked> Remember me</label>'
        '<button type="submit" name="action" value="login">Sign in</button>'
        "</form>"
    )
    response = _page("Sign in", body)
    if fresh:
        _set_session(response, request.app[KEY], session)
    return response


async def _login(request: web.Request) -> web.StreamResponse:
    session = _session(request)
    if session is None:
        return _forbidden("no valid session cookie (load the login form first)")
    form = await request.post()
    token = str(form.get("csrf_token", ""))
    if not token or not hmac.compare_digest(token, str(session["csrf"])):
        return _forbidden("CSRF token missing or wrong")
    if form.get("username") != USERNAME or form.get("password") != PASSWORD:
        return _forbidden("wrong user name or password")
    signed_in = {"sid": secrets.token_hex(8), "csrf": secrets.token_urlsafe(16), "user": USERNAME}
    response = web.Response(status=303, headers={"Location": "/account/orders"})
    _set_session(response, request.app[KEY], signed_in)
    return response


def _signed_in(request: web.Request) -> bool:
    session = _session(request)
    return session is not None and session.get("user") == USERNAME


async def _orders(request: web.Request) -> web.StreamResponse:
    if not _signed_in(request):
        return _forbidden("sign in first")
    try:
        page = int(request.query.get("page", "1"))
    except ValueError as exc:
        raise web.HTTPNotFound(text="no such page") from exc
    every = orders(request.app[CATALOG])
    pages = -(-len(every) // ORDERS_PER_PAGE)
    if not 1 <= page <= pages:
        raise web.HTTPNotFound(text="no such page")
    shown = every[(page - 1) * ORDERS_PER_PAGE : page * ORDERS_PER_PAGE]
    rows = "".join(
        f'<li><a class="order" href="/account/orders/{o["order"]}">{o["order"]}</a> '
        f'<span class="date">{o["date"]}</span></li>'
        for o in shown
    )
    pager = ""
    if page < pages:
        pager = f'<a class="next" href="/account/orders?page={page + 1}">Next</a>'
    return _page(f"Your orders (page {page} of {pages})", f'<ul class="orders">{rows}</ul>{pager}')


async def _order(request: web.Request) -> web.StreamResponse:
    if not _signed_in(request):
        return _forbidden("sign in first")
    wanted = request.match_info["order"]
    order = next((o for o in orders(request.app[CATALOG]) if o["order"] == wanted), None)
    if order is None:
        raise web.HTTPNotFound(text="no such order")
    items = "".join(f'<tr><td class="sku">{sku}</td></tr>' for sku in order["skus"])
    body = (
        f'<article class="order" data-id="{order["order"]}">'
        f'<p>Placed on <time class="date">{order["date"]}</time></p>'
        f'<table class="items">{items}</table>'
        f'<p>Total: <span class="total">€{order["total"]:,.2f}</span></p></article>'
    )
    return _page(f"Order {order['order']}", body)


# -- the ViewState search ------------------------------------------------------------------------


def _state_fields(key: bytes, step: int, values: list[str], **state: Any) -> str:
    """The hidden ``__VIEWSTATE`` and ``__EVENTVALIDATION`` of a step: the state, and the
    values the step's controls may post back, both signed (and the second tied to the first)."""
    viewstate = _sign(key, {"step": step, "nonce": secrets.token_hex(4), **state})
    digest = hashlib.sha256(viewstate.encode()).hexdigest()[:16]
    validation = _sign(key, {"vs": digest, "values": values})
    return (
        '<input type="hidden" name="__EVENTTARGET" value="">'
        '<input type="hidden" name="__EVENTARGUMENT" value="">'
        f'<input type="hidden" name="__VIEWSTATE" id="__VIEWSTATE" value="{viewstate}">'
        f'<input type="hidden" name="__EVENTVALIDATION" value="{validation}">'
    )


async def _search_form(request: web.Request) -> web.StreamResponse:
    catalog = request.app[CATALOG]
    slugs = [c.slug for c in catalog.categories]
    options = "".join(
        f'<option value="{c.slug}">{escape(c.name)}</option>' for c in catalog.categories
    )
    body = (
        '<form method="post" action="./search-vs" id="aspnetForm">'
        f"{_state_fields(request.app[KEY], 1, slugs)}"
        f'<select name="{CATEGORY_FIELD}" id="ddlCategory">{options}</select>'
        '<input type="submit" name="ctl00$Main$btnNext" value="Next &gt;">'
        "</form>"
    )
    return _page("Product search", body)


def _invalid_state() -> web.Response:
    return _page(
        "Server Error in '/' Application",
        '<p class="error">The state information is invalid for this page and might be '
        "corrupted (Validation of viewstate MAC failed).</p>",
        status=400,
    )


def _posted_state(key: bytes, form: Any, step: int) -> tuple[dict[str, Any], list[str]] | None:
    """The posted ViewState of ``step`` and the values its validation allows; None if either
    is missing, tampered, of another step, or not the pair the page gave."""
    viewstate = str(form.get("__VIEWSTATE", ""))
    state = _verify(key, viewstate)
    validation = _verify(key, str(form.get("__EVENTVALIDATION", "")))
    if state is None or validation is None or state.get("step") != step:
        return None
    if validation.get("vs") != hashlib.sha256(viewstate.encode()).hexdigest()[:16]:
        return None
    return state, list(validation.get("values", []))


async def _search_postback(request: web.Request) -> web.StreamResponse:
    key, catalog = request.app[KEY], request.app[CATALOG]
    form = await request.post()
    step = 2 if "ctl00$Main$btnSearch" in form else 1
    posted = _posted_state(key, form, step)
    if posted is None:
        return _invalid_state()
    state, allowed = posted
    if step == 1:
        slug = str(form.get(CATEGORY_FIELD, ""))
        if slug not in allowed:
            return _invalid_state()  # ASP.NET: "Invalid postback or callback argument"
        category = catalog.category(slug)
        assert category is not None
        body = (
            '<form method="post" action="./search-vs" id="aspnetForm">'
            f"{_state_fields(key, 2, ['name', 'price'], category=slug)}"
            f"<p>Category: <b>{escape(category.name)}</b></p>"
            f'<select name="{SORT_FIELD}"><option value="name" selected>Name</option>'
            '<option value="price">Price</option></select>'
            f'<label><input type="checkbox" name="{STOCK_FIELD}"> In stock only</label>'
            '<input type="submit" name="ctl00$Main$btnSearch" value="Search">'
            "</form>"
        )
        return _page("Product search: options", body)
    sort = str(form.get(SORT_FIELD, "name"))
    if sort not in allowed:
        return _invalid_state()
    slug = str(state["category"])
    in_stock_only = STOCK_FIELD in form
    listed = [p for p in catalog.in_category(slug, sort) if p.in_stock or not in_stock_only]
    rows = "".join(
        f'<tr class="result"><td class="sku">{p.sku}</td><td class="name">{escape(p.name)}</td>'
        f'<td class="category">{p.category}</td></tr>'
        for p in listed
    )
    return _page(
        f"Search results ({len(listed)})", f'<table id="ctl00_Main_gvResults">{rows}</table>'
    )
