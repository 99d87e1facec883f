"""Every exception crawlfleet raises on purpose, as one tree.

::

    CrawlfleetError
    ├── UsageError                 bad input from the user: one line, exit code 2, no traceback
    │   ├── SpiderLoadError        spider file missing, unreadable, or without a Spider class
    │   └── ConfigError            crawlfleet.toml / flags / environment are inconsistent
    ├── FormError                  follow_form found no such form or submit button (a ValueError)
    │   └── FormNotFound           no such form on the page (an IndexError too, as in Scrapy)
    ├── StoreError                 the queue store misbehaved
    │   ├── LeaseLost              a complete/fail/heartbeat whose fencing token no longer matches
    │   └── StoreUnavailable       the store could not be reached (refused, cut, shutting down,
    │                              out of connections) for longer than the outage grace
    ├── RawStoreUnavailable        the raw store (an object store) does not answer or refuses
    │                              the WARC files: the worker's own fault, like a full disk
    ├── WorkerStopped              a worker stopped itself on a fault it cannot work around (the
    │                              store refusing its results again and again for a bug): exit 3,
    │                              never restarted by ``crawl``
    ├── ParseError                 the spider's callback raised on a page
    │   ├── TooComplex             the page nests too deep to parse, or its parse ran too long
    │   ├── TooManyItems           the callback yielded more than a page may (an endless loop?)
    │   └── SitemapError           a sitemap that is not one: not XML, another root, cut short,
    │                              bigger than a sitemap may be
    └── FetchError                 one fetch did not produce a usable response
        ├── RetryableFetchError    worth trying again later (maybe over another route)
        │   ├── FetchTimeout
        │   ├── ConnectError
        │   │   └── HostUnreachable  the host itself is down: connection refused, no such
        │   │                      name (DNS), no connection within the connect timeout
        │   ├── LocalResourceError the worker, not the site, ran out: file descriptors (EMFILE),
        │   │                      buffers, local ports; never counted against a host
        │   ├── DataLoss           connection cut mid-body, broken chunking
        │   ├── BrowserError       the browser failed the page: renderer crash, closed target
        │   ├── ProxyError         the route failed, not the request: proxy refused, unreachable,
        │   │                      timed out, rejected the credentials or the tunnel
        │   └── RobotsUnreachable  a redirect target's robots.txt cannot be read now
        └── PermanentFetchError    trying again cannot help
            ├── TooLarge           body or headers over the cap (decompression bombs too)
            │   └── BodyTooLarge   the (decoded) body passed its limit; says how far it got
            ├── TooManyRedirects
            ├── AddressRefused     resolves to a private/loopback address not allowed
            ├── UnsupportedScheme
            ├── InvalidURL         the URL (or a redirect's Location) cannot be parsed
            ├── TlsError           the site's certificate is not trusted (self-signed, expired,
            │                      another host's, an unknown authority) or TLS itself failed
            ├── RobotsDisallowed   robots.txt disallows the URL (on every redirect hop too)
            ├── RobotsUnavailable  a redirect target's robots.txt unreadable past the give-up
            ├── OutOfScope         a redirect leads off the crawl's scope and the request's host
            └── NotRenderable      the browser would download it, not show it (attachments)

A fetch error's class decides the retry branch; the retry policy (``policy.retry``) maps it to a
decision, so nothing else needs to know which exception a client library raised.
"""

from __future__ import annotations


class CrawlfleetError(Exception):
    """Base of every deliberate crawlfleet error."""

    #: the exit code of a command that ends on this error (shown as one line, no traceback)
    exit_code = 2


class UsageError(CrawlfleetError):
    """The user gave input we cannot act on; the message is shown as one line."""


class SpiderLoadError(UsageError):
    """A spider file does not exist, does not import, or defines no Spider."""


class ConfigError(UsageError):
    """Configuration is invalid or inconsistent."""


class FormError(CrawlfleetError, ValueError):
    """``response.follow_form`` found no form (or no submit button) matching what it was asked,
    or was given form data that is no form data."""


class FormNotFound(FormError, IndexError):
    """No form of the page is the one asked for (an ``IndexError`` too, as Scrapy raises for a
    form number the page does not have)."""


class StoreError(CrawlfleetError):
    """The queue store refused or failed an operation."""


class LeaseLost(StoreError):
    """The lease's fencing token no longer matches: another worker owns the request now."""


class StoreUnavailable(StoreError):
    """The store could not be reached: the connection was refused or cut, the server is shutting
    down or starting up, or it has no connection slot left. A worker waits this out for its
    ``store_outage_grace``; this is raised once the grace is spent (or at once without one)."""


class RawStoreUnavailable(CrawlfleetError):
    """The raw store does not take the WARC files (unreachable, refusing, the bucket gone). Not
    a queue store error: the worker stops leasing and gives its leases back, as on a full disk,
    until the store answers again (:mod:`crawlfleet.worker.faults`)."""


class WorkerStopped(CrawlfleetError):
    """A worker stopped itself: going on would only spin (every result refused for the same
    bug). Its leases are left to expire; ``crawl`` does not restart it and ends with the error."""

    #: the worker process's exit code (2 is a usage error, 1 a crash)
    exit_code = 3


class ParseError(CrawlfleetError):
    """The spider's callback raised: a bug to fix, then replay (not worth an automatic retry)."""


class TooComplex(ParseError):
    """The page is past what a parse may cost (nesting depth, parse time): ``too_complex``."""


class SitemapError(ParseError):
    """A page fetched as a sitemap is not one (malformed XML, another root element, a cut or
    oversized gzip file): the page ends ``dead(bad_sitemap)``, the crawl goes on."""


class TooManyItems(ParseError):
    """A callback yielded more items than one page may (``worker.max_yields_per_page``)."""


class FetchError(CrawlfleetError):
    """A fetch failed; ``kind`` is a short stable name used in metrics and dead letters."""

    kind = "fetch_error"


class RetryableFetchError(FetchError):
    kind = "retryable"


class FetchTimeout(RetryableFetchError):
    kind = "timeout"


class ConnectError(RetryableFetchError):
    kind = "connect"


class HostUnreachable(ConnectError):
    """No connection to the host at all: refused, its name does not resolve, or no connection
    within the connect timeout. The host's state, not one request's: robots.txt that fails so
    ends the host's requests ``dead(host_unreachable)`` after a short wait."""

    kind = "host_unreachable"


class LocalResourceError(RetryableFetchError):
    """The worker ran out of a local resource (file descriptors, socket buffers, ephemeral
    ports): its own fault, retried later without using an attempt or blaming the host."""

    kind = "local_resource"


class DataLoss(RetryableFetchError):
    kind = "data_loss"


class BrowserError(RetryableFetchError):
    """The browser did not produce the page: its renderer or the browser crashed, the page
    was closed under it, or it answered the protocol with an unexpected error."""

    kind = "browser"


class ProxyError(RetryableFetchError):
    """The proxy, not the target, failed: blame the route and retry on another one.

    ``reason`` says how, with a stable name: ``refused`` (nothing listens: the proxy is down),
    ``unreachable``, ``timeout``, ``auth`` (407 or SOCKS authentication failed), ``tunnel`` (the
    proxy refused to CONNECT or to reach the target) or ``protocol`` (it spoke nonsense).
    """

    kind = "proxy"

    def __init__(self, message: str, *, reason: str = "protocol") -> None:
        super().__init__(message)
        self.reason = reason


class PermanentFetchError(FetchError):
    kind = "permanent"


class TooLarge(PermanentFetchError):
    kind = "too_large"


class BodyTooLarge(TooLarge):
    """The (decoded) body passed ``limit`` bytes; decoding stopped after ``seen`` bytes."""

    def __init__(self, message: str, *, limit: int, seen: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.seen = seen


class TooManyRedirects(PermanentFetchError):
    kind = "too_many_redirects"


class AddressRefused(PermanentFetchError):
    kind = "address_refused"


class UnsupportedScheme(PermanentFetchError):
    kind = "unsupported_scheme"


class InvalidURL(PermanentFetchError):
    kind = "invalid_url"


class TlsError(PermanentFetchError):
    """The TLS handshake failed: the site's certificate is not trusted, or the two sides share
    no protocol. The message says why in a few words (``self-signed certificate``,
    ``certificate expired``, ``hostname mismatch``, ``unknown certificate authority``), the
    same for every fetcher; trying again cannot help until the site or the trust changes
    (``[fetch] ca_file``, ``SSL_CERT_FILE``, ``tls_verify = False``)."""

    kind = "tls_error"


class RobotsDisallowed(PermanentFetchError):
    """robots.txt disallows the URL (checked on every redirect hop too)."""

    kind = "robots"


class RobotsUnavailable(PermanentFetchError):
    """The robots.txt of a redirect's target host could not be read for longer than the give-up
    time (``[pacing] robots_give_up``)."""

    kind = "robots_unavailable"


class OutOfScope(PermanentFetchError):
    """A redirect leads off the crawl's scope (``allowed_domains``, or the hosts of
    ``start_urls``) and off the request's own host."""

    kind = "out_of_scope"


class RobotsUnreachable(RetryableFetchError):
    """The robots.txt of a redirect's target host cannot be read now: try the request later."""

    kind = "robots_unreachable"


class NotRenderable(PermanentFetchError):
    """The browser would download the URL rather than display it (an attachment, a file
    type it does not render)."""

    kind = "not_renderable"
