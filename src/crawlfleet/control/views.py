"""The dashboard's pages: one HTML shell per page; ``static/dashboard.js`` fills it from the JSON
API (tables built with text nodes only: domain names, URLs and error messages come from the
crawled web) and draws the charts with the vendored uPlot. No build step, nothing from a CDN."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Final

from aiohttp import web

from crawlfleet.control.security import GUARD

__all__ = ["PAGES", "STATIC", "register"]

STATIC: Final = Path(__file__).with_name("static")
#: path -> (page name, title), in the navigation's order
PAGES: Final = {
    "/": ("overview", "Overview"),
    "/jobs": ("jobs", "Jobs"),
    "/domains": ("domains", "Domains"),
    "/routes": ("routes", "Routes"),
    "/workers": ("workers", "Workers"),
    "/dead": ("dead", "Dead letters"),
    "/quarantine": ("quarantine", "Quarantine"),
    "/quality": ("quality", "Quality"),
}
REFRESH_MS: Final = web.AppKey("refresh_ms", int)


def register(app: web.Application) -> None:
    for path in PAGES:
        app.router.add_get(path, page)
    app.router.add_static("/static/", STATIC, follow_symlinks=False, append_version=False)


def shell(name: str, title: str, token: str, refresh_ms: int) -> str:
    nav = "".join(
        f'<a href="{path}"{" aria-current=page" if n == name else ""}>{escape(t)}</a>'
        for path, (n, t) in PAGES.items()
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="crawlfleet-token" content="{escape(token)}">
<meta name="crawlfleet-refresh" content="{refresh_ms}">
<title>crawlfleet · {escape(title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/static/uPlot.min.css">
<link rel="stylesheet" href="/static/dashboard.css">
</head>
<body>
<header><strong>crawlfleet</strong><nav>{nav}</nav><span id="updated"></span></header>
<main id="page" data-page="{name}"><h1>{escape(title)}</h1>
<section id="alerts"></section><section id="content"></section></main>
<script src="/static/uPlot.iife.min.js"></script>
<script src="/static/dashboard.js"></script>
</body>
</html>
"""


async def page(request: web.Request) -> web.Response:
    name, title = PAGES[request.path]
    token = request.app[GUARD].action_token
    refresh = request.app.get(REFRESH_MS, 5000)
    return web.Response(
        text=shell(name, title, token, refresh),
        content_type="text/html",
        headers={"Cache-Control": "no-store"},
    )
