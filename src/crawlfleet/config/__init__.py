"""Settings: defaults < ``crawlfleet.toml`` < ``CRAWLFLEET_*`` environment < command-line flags.

One frozen :class:`Settings` of typed sections, one per table of the file. Every key is
optional; an unknown key or section is an error that names the nearest known one::

    queue = "sqlite:///.crawlfleet/queue.db"      # or postgresql://user:pass@host/db

    [store]
    raw = ".crawlfleet/warc"                       # WARC directory, or s3://bucket/prefix
    s3_endpoint = "http://127.0.0.1:9000"          # S3-compatible server (default: AWS)
    raw_spool = ".crawlfleet/spool"                # local WARC files waiting for upload to S3
    warc_max_size = 1073741824
    warc_gzip_level = 1

    [worker]
    concurrency = 64          # requests in flight per worker process
    lease_ttl = 60            # seconds; heartbeats extend it every lease_ttl/3
    lease_batch = 100
    fetch_timeout = 30
    max_body = 16777216
    max_redirects = 20
    user_agent = "crawlfleet/0.1"
    stats_every = 5.0         # seconds between a worker's reports of its counters to the store
    max_yields_per_page = 100000  # items one page's callback may yield (then too_many_items)
    parse_timeout = 30.0      # seconds one page's callback may run (then too_complex)
    cache_memory = 67108864   # bytes of caches per worker, shared by its jobs (64 MiB; >= 1 MiB)
    store_outage_grace = 600  # seconds a worker waits out a queue store that is away, then exits

    [retry]
    base = 2.0                # first backoff, doubled per attempt, with jitter
    cap = 600.0

    [pacing]                  # adaptive pacing of each lane (domain), applied by the store
    max_delay = 60.0          # slowest pace (seconds between request starts) push-back can set
    pushback_share = 0.25     # share of push-back (429/503/blocks/no answer) among recent ...
    pushback_window = 25      # ... responses (EWMA) that slows a lane down; a lone 503 does not
    slowdown_factor = 2.0     # delay multiplier when it does
    recover_factor = 0.5      # delay multiplier per second without push-back
    recover_every = 0.5       # seconds per doubling of concurrency while healthy
    start_concurrency = 4     # a new lane's width; it doubles from there
    limit_fraction = 0.85     # after a 429, go on at this share of the rate it accepted ...
    probe = 0.02              # ... and probe upward by this fraction a second
    limit_hold = 600.0        # seconds the 429 ceiling holds without further push-back
    latency_ratio = 1.5       # typical latency past this x the lane's unloaded one is load
    crawl_delay_cap = 30.0    # robots.txt Crawl-delay is a delay floor, capped here
    retry_after_cap = 3600.0
    circuit_threshold = 5     # failures in a row (no response or 5xx) that close a host ...
    circuit_base = 30.0       # ... for this long, doubling per reopening that fails ...
    circuit_cap = 3600.0      # ... up to this
    breaker_cooldown = 30.0   # a proxy that refuses or fails is out this long, then probed ...
    breaker_cooldown_cap = 3600.0  # ... doubling per failed probe, up to this
    robots_recheck = 60.0     # seconds a host waits while its robots.txt is unreachable (5xx)
    robots_give_up = 120.0    # ... and after which its requests end dead(robots_unavailable)
    host_recheck = 2.5        # a host refusing connections (or no DNS name) is tried again ...
    host_give_up = 10.0       # ... until this (3 tries at least): then dead(host_unreachable)

    [traps]                   # trap guards (a spider's own attributes take precedence)
    max_depth = 50            # links from a seed (false: no limit, for any guard)
    max_url_length = 2083
    max_repeated_segments = 2 # one path segment repeated more often: /a/b/a/b/a/b
    host_page_budget = 100000 # most requests per host per job, counted fleet-wide
    pattern_budget = false    # most requests per URL shape (digits and ids erased; none by default)

    [domains."shop.example"]  # politeness for one domain, across the whole fleet
    concurrency = 4
    rate = 2.0                # requests per second

    [[routes.pool]]           # proxy pools: see crawlfleet.routes.pools
    name = "dc"
    proxies = ["http://user:pass@10.0.0.1:3128"]

    [control]                 # the control API and dashboard (crawlfleet serve)
    host = "127.0.0.1"
    port = 8686
    token = ""                # required to bind anywhere but loopback
    allowed_hosts = ""        # Host names besides loopback's the dashboard answers (a,b)
    alert_oldest_age = 600.0  # alert: a ready request waited longer (seconds)
    alert_block_rate = 0.2    # alert: share of a domain's recent attempts blocked
    alert_validation_rate = 0.05  # alert: share of a job's records that failed validation
    alive_after = 30.0        # a worker not heard of for this long is no longer alive (stale)

    [fetch]                   # HTTPS and impersonation (every fetcher of a job)
    ca_file = ""              # PEM authorities trusted besides the system's and SSL_CERT_FILE's
    tls_verify = true         # false: certificates are not checked (warned once per host)
    impersonate = "chrome"    # the impersonating fetcher's browser: chrome, safari, firefox

    [browser]                 # the Chromium pool of a worker running the browser kind
    executable = "/usr/bin/chromium"
    contexts = 4              # N: pages in flight, each context one session identity
    pages_per_context = 50    # M: a context is closed (and a fresh one opened) after this many
    pages_per_browser = 2000  # K: the browser is restarted after this many pages ...
    memory_budget = 2147483648  # ... or once its processes hold this many bytes (RssAnon+Shmem)

    [quality]                       # the data-quality monitors of every run (see Data quality)
    check_every = 60.0              # seconds between two checks of a running run (fleet-wide)
    baseline_runs = 5               # finished runs whose median is the baseline
    min_records = 20                # records a run needs before its shares are judged
    item_drop = 0.3                 # alert: records down by more than this share of the baseline
    pages_drop = 0.3                # ... pages fetched likewise
    coverage_drop = 0.1             # ... a field's coverage down more than ten points
    coverage = { price = 1.0 }      # ... a field's coverage below its rule (none by default)
    validation_rate = 0.05          # ... more of the run's records quarantined
    block_rate = 0.2                # ... more of its attempts blocked
    dead_rate = 0.1                 # ... more of its finished requests given up
    retry_depth = 1.0               # ... more retries per finished request
    zero_records = true             # ... a run that finished with no record
    max_run_time = false            # ... a run longer than this many seconds (false: none)
    examples = 5                    # examples each alert links to

    [notify]                        # where alerts and run summaries go (see Notifications)
    webhook = ""                    # or a list of URLs (CRAWLFLEET_NOTIFY_WEBHOOK)
    secret = ""                     # HMAC-SHA256 signature of each body (CRAWLFLEET_NOTIFY_SECRET)
    slack_webhook = ""
    smtp = ""                       # smtp://user:pass@host:587 or smtps://...
    email_to = []
    tries = 20

    [[sink]]                        # each run's changed records, in batches (none by default)
    kind = "webhook"
    url = "https://warehouse.example.com/ingest"
    batch = 500

Environment: ``CRAWLFLEET_QUEUE``, ``CRAWLFLEET_RAW``, ``CRAWLFLEET_S3_ENDPOINT``,
``CRAWLFLEET_RAW_SPOOL``, ``CRAWLFLEET_CONCURRENCY``, ``CRAWLFLEET_LEASE_TTL``,
``CRAWLFLEET_FETCH_TIMEOUT``, ``CRAWLFLEET_CONTROL_TOKEN``, ``CRAWLFLEET_NOTIFY_WEBHOOK``,
``CRAWLFLEET_NOTIFY_SECRET``. S3 credentials come from the usual
``AWS_*`` variables (or any other source boto3 reads); they are not settings and never printed.
Every repr masks the passwords of the queue URL and of proxies, and the control token.

Overrides (flags, ``-s KEY=VALUE``, a spider's ``custom_settings``) name a key as
``section.key`` (``worker.concurrency``) or by its bare name where that is unambiguous
(``concurrency``); strings are converted to the key's type.
"""

from __future__ import annotations

from crawlfleet.config.keys import JOB_SECTIONS, known_keys, nearest, resolve_key, section_keys
from crawlfleet.config.load import load_settings
from crawlfleet.config.sections import (
    DEFAULT_QUEUE,
    DEFAULT_RAW,
    DEFAULT_SPOOL,
    BrowserSection,
    ControlSettings,
    FetchSection,
    PacingSettings,
    RetrySettings,
    RoutesSettings,
    StoreSettings,
    TrapSettings,
    WorkerSettings,
)
from crawlfleet.config.settings import Settings

__all__ = [
    "DEFAULT_QUEUE",
    "DEFAULT_RAW",
    "DEFAULT_SPOOL",
    "JOB_SECTIONS",
    "BrowserSection",
    "ControlSettings",
    "FetchSection",
    "PacingSettings",
    "RetrySettings",
    "RoutesSettings",
    "Settings",
    "StoreSettings",
    "TrapSettings",
    "WorkerSettings",
    "known_keys",
    "load_settings",
    "nearest",
    "resolve_key",
    "section_keys",
]
