"""Which fetcher a new request of an ``auto`` spider starts with (pure).

A page type (domain and :func:`~crawlfleet.policy.traps.page_type`) is judged in the browser:
it needs the browser when the rendered page gives the spider more than the raw document, HTTP
will do otherwise. Requests of a type judged ``browser`` go straight to browser workers, but
one in :data:`PROBE_EVERY` is still sent over HTTP, to learn whether the type still needs the
browser (a site that went back to server-side rendering is crawled cheaply again): if the
spider gets its records from the raw page the type is judged ``http``; if not, the request goes
on to the browser without using an attempt. Which requests probe is decided by their
fingerprint, so every worker and every retry of a request agrees.
"""

from __future__ import annotations

from typing import Final

__all__ = ["PROBE_EVERY", "fetcher_for", "probes_back"]

#: one in this many new requests of a page type judged ``browser`` tries HTTP again
PROBE_EVERY: Final = 16


def probes_back(fingerprint: bytes, every: int = PROBE_EVERY) -> bool:
    """True for the one request in ``every`` (by its fingerprint, a hash: its first byte is
    uniform, so ``every`` divides 256 for an exact share) that probes back over HTTP."""
    return fingerprint[0] % every == 0


def fetcher_for(
    spider_fetcher: str,
    needs: str | None,
    *,
    suspected: bool,
    fingerprint: bytes,
    every: int = PROBE_EVERY,
) -> str:
    """The fetcher of a new request with none of its own.

    ``spider_fetcher`` is the spider's; ``needs`` what its page type was judged to need (None:
    not judged yet); ``suspected``: this worker sent a page of that type to the browser and
    awaits its judgement. A spider that is not ``auto`` keeps its fetcher; an ``auto`` request
    stays ``auto`` (HTTP first) unless its type needs the browser and it is no probe, or its
    type is suspected and not judged yet.
    """
    if spider_fetcher != "auto":
        return spider_fetcher
    if needs is None:
        return "browser" if suspected else "auto"
    if needs == "browser" and not probes_back(fingerprint, every):
        return "browser"
    return "auto"
