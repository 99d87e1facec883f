-- The SQLite frontier. One file, one writer at a time (WAL): every write transaction starts with
-- BEGIN IMMEDIATE so a read-then-write never hits SQLITE_BUSY half way through (a deferred
-- transaction upgrading to a writer fails despite busy_timeout in WAL mode).

-- name: schema
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS jobs (
    id           INTEGER PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    spider       TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'running',
    settings     TEXT NOT NULL DEFAULT '{}',
    max_attempts INTEGER NOT NULL DEFAULT 5,
    created_at   REAL NOT NULL
);

-- Politeness is per domain across every job and worker: the store, not a process, holds it.
-- delay is the current (adaptive) gap between request starts; next_at the earliest next start.
CREATE TABLE IF NOT EXISTS domains (
    domain        TEXT PRIMARY KEY,
    max_in_flight INTEGER NOT NULL,
    min_delay     REAL NOT NULL,
    delay         REAL NOT NULL,
    in_flight     INTEGER NOT NULL DEFAULT 0,
    next_at       REAL NOT NULL DEFAULT 0,
    blocked_until REAL NOT NULL DEFAULT 0,
    last_lease_at REAL NOT NULL DEFAULT 0
);

-- lease walks domains oldest-served first: an index instead of a sort of every domain row
CREATE INDEX IF NOT EXISTS domains_served ON domains (last_lease_at);

CREATE TABLE IF NOT EXISTS requests (
    id               INTEGER PRIMARY KEY,
    job_id           INTEGER NOT NULL,
    fingerprint      BLOB NOT NULL,
    url              TEXT NOT NULL,
    domain           TEXT NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 0,
    depth            INTEGER NOT NULL DEFAULT 0,
    callback         TEXT,
    meta             TEXT,
    method           TEXT NOT NULL DEFAULT 'GET',
    body             BLOB,
    fetcher          TEXT,
    state            TEXT NOT NULL DEFAULT 'queued',
    ready_at         REAL NOT NULL DEFAULT 0,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_token      INTEGER NOT NULL DEFAULT 0,
    lease_expires_at REAL,
    status           INTEGER,
    dead_reason      TEXT,
    last_error       TEXT,
    created_at       REAL NOT NULL,
    finished_at      REAL,
    -- the final arbiter of URL dedup: workers dedupe in memory first, this catches the rest
    UNIQUE (job_id, fingerprint)
);
-- lease picks the best ready requests of one domain: a partial index keeps done rows out of it
CREATE INDEX IF NOT EXISTS requests_ready
    ON requests (domain, priority DESC, id) WHERE state = 'queued';
-- rescue scans only live leases
CREATE INDEX IF NOT EXISTS requests_leased
    ON requests (lease_expires_at) WHERE state = 'leased';
CREATE INDEX IF NOT EXISTS requests_job_state ON requests (job_id, state);

-- a worker's own live leases, per domain (for its fair share of a domain's slots)
CREATE INDEX IF NOT EXISTS requests_owner
    ON requests (lease_owner, domain) WHERE state = 'leased';

-- workers seen leasing lately: a domain's in-flight slots are shared among them, so a worker
-- that grabbed every slot first cannot keep the others idle
CREATE TABLE IF NOT EXISTS workers (
    id         TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    last_seen  REAL NOT NULL
);

-- failed attempts only (successes are the common case and need no history row)
CREATE TABLE IF NOT EXISTS attempts (
    request_id INTEGER NOT NULL,
    n          INTEGER NOT NULL,
    at         REAL NOT NULL,
    outcome    TEXT NOT NULL,
    status     INTEGER,
    error      TEXT,
    route      TEXT
);
CREATE INDEX IF NOT EXISTS attempts_request ON attempts (request_id);

CREATE TABLE IF NOT EXISTS records (
    job_id         INTEGER NOT NULL,
    key            TEXT NOT NULL,
    data           TEXT NOT NULL,
    url            TEXT NOT NULL,
    fetched_at     REAL NOT NULL,
    warc_file      TEXT,
    warc_record_id TEXT,
    updated_at     REAL NOT NULL,
    PRIMARY KEY (job_id, key)
);

CREATE TABLE IF NOT EXISTS quarantine (
    id             INTEGER PRIMARY KEY,
    job_id         INTEGER NOT NULL,
    url            TEXT NOT NULL,
    data           TEXT,
    errors         TEXT NOT NULL,
    fetched_at     REAL NOT NULL,
    warc_file      TEXT,
    warc_record_id TEXT
);
CREATE INDEX IF NOT EXISTS quarantine_job ON quarantine (job_id);

-- content dedup: the first request whose body had this hash (later ones point at it)
CREATE TABLE IF NOT EXISTS content (
    job_id     INTEGER NOT NULL,
    hash       BLOB NOT NULL,
    request_id INTEGER NOT NULL,
    PRIMARY KEY (job_id, hash)
) WITHOUT ROWID;

-- name: migration_0002_pacing
-- Schema version 2: adaptive pacing held per domain (policy.pacing.PacingState, applied by
-- complete and fail), the robots.txt Crawl-delay floor, and trap budget counters.
-- concurrency is the current cap on in-flight requests (max_in_flight is the configured one).
-- Statements are split on ";" + newline and run in one transaction by the opener.
ALTER TABLE domains ADD COLUMN concurrency INTEGER NOT NULL DEFAULT 0;
UPDATE domains SET concurrency = max_in_flight;
ALTER TABLE domains ADD COLUMN delay_floor REAL NOT NULL DEFAULT 0;
ALTER TABLE domains ADD COLUMN ewma_latency REAL;
ALTER TABLE domains ADD COLUMN errors_in_row INTEGER NOT NULL DEFAULT 0;
ALTER TABLE domains ADD COLUMN ok_in_row INTEGER NOT NULL DEFAULT 0;
ALTER TABLE domains ADD COLUMN slowed_at REAL NOT NULL DEFAULT 0;
ALTER TABLE domains ADD COLUMN limit_delay REAL NOT NULL DEFAULT 0;
ALTER TABLE domains ADD COLUMN ok_rate REAL NOT NULL DEFAULT 0;
ALTER TABLE domains ADD COLUMN rate_at REAL NOT NULL DEFAULT 0;
ALTER TABLE domains ADD COLUMN trips INTEGER NOT NULL DEFAULT 0;
-- requests a job admitted per host ("host", domain) and per URL pattern ("pattern", pattern):
-- the page budgets are counted here, at enqueue, so they hold across every worker
CREATE TABLE budgets (
    job_id INTEGER NOT NULL,
    kind   TEXT NOT NULL,
    key    TEXT NOT NULL,
    used   INTEGER NOT NULL,
    PRIMARY KEY (job_id, kind, key)
) WITHOUT ROWID;

-- name: migration_0003_content
-- Schema version 3: a page whose body was seen before under another URL is still parsed (its
-- links and records depend on its URL) and archived as a WARC revisit record; the request notes
-- the first request with that content, and records carry the WARC record that holds the payload.
ALTER TABLE requests ADD COLUMN duplicate_of INTEGER;
ALTER TABLE records ADD COLUMN warc_refers_to_file TEXT;
ALTER TABLE records ADD COLUMN warc_refers_to TEXT;
ALTER TABLE quarantine ADD COLUMN warc_refers_to_file TEXT;
ALTER TABLE quarantine ADD COLUMN warc_refers_to TEXT;

-- name: migration_0004_pacing_document
-- Schema version 4: a lane's pacing state (policy.pacing.PacingState) is one JSON document, but
-- for the columns the lease reads (delay, concurrency, blocked_until, delay_floor): the policy can
-- then change what it remembers without a migration. The older columns stay, unused.
ALTER TABLE domains ADD COLUMN pacing TEXT NOT NULL DEFAULT '{}';
UPDATE domains SET pacing = json_object(
    'ewma_latency', ewma_latency, 'errors_in_row', errors_in_row, 'ok_in_row', ok_in_row,
    'slowed_at', slowed_at, 'limit_delay', limit_delay, 'ok_rate', ok_rate, 'rate_at', rate_at,
    'trips', trips);

-- name: migration_0005_work_version
-- Schema version 5: a counter every transaction that may make work leasable (requests queued,
-- slots freed, jobs resumed) moves on; idle workers of other processes poll it (a read, no lock)
-- instead of leasing blindly. A lease alone does not move it: idle workers must not wake each
-- other.
INSERT OR IGNORE INTO meta (key, value) VALUES ('work_version', '0');

-- name: migration_0008_lanes
-- Schema version 8: the unit of pacing is a lane, a (domain, route) pair. A lane keeps the
-- adaptive pacing (delay, concurrency, hold, the controller's document), its in-flight count and
-- its next start, and its route's own limits; the domain keeps what caps the sum over its lanes
-- (domain_concurrency, domain_rate, the robots.txt Crawl-delay floor), its total in flight, its
-- next start, and the route tier it is crawled on. Routes keep their circuit breaker. A leased
-- request remembers the route its lease goes through. Every domain so far gets one lane,
-- "direct", with the pacing it had.
CREATE TABLE lanes (
    domain        TEXT NOT NULL,
    route         TEXT NOT NULL,
    tier          INTEGER NOT NULL DEFAULT 0,
    max_in_flight INTEGER NOT NULL,
    min_delay     REAL NOT NULL DEFAULT 0,
    delay_floor   REAL NOT NULL DEFAULT 0,
    delay         REAL NOT NULL DEFAULT 0,
    concurrency   INTEGER NOT NULL,
    blocked_until REAL NOT NULL DEFAULT 0,
    pacing        TEXT NOT NULL DEFAULT '{}',
    health        TEXT NOT NULL DEFAULT '{}',
    in_flight     INTEGER NOT NULL DEFAULT 0,
    next_at       REAL NOT NULL DEFAULT 0,
    last_lease_at REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (domain, route)
) WITHOUT ROWID;
-- the lease walks lanes oldest-served first
CREATE INDEX lanes_served ON lanes (last_lease_at);
CREATE TABLE routes (
    id         TEXT PRIMARY KEY,
    pool       TEXT NOT NULL,
    tier       INTEGER NOT NULL DEFAULT 0,
    cost       REAL NOT NULL DEFAULT 0,
    breaker    TEXT NOT NULL DEFAULT '{}',
    open_until REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO routes (id, pool) VALUES ('direct', 'direct');
ALTER TABLE domains ADD COLUMN tier INTEGER NOT NULL DEFAULT 0;
ALTER TABLE domains ADD COLUMN escalation TEXT NOT NULL DEFAULT '{}';
ALTER TABLE requests ADD COLUMN lease_route TEXT;
-- (the direct route has no limits of its own: its lane's are its domain's)
INSERT INTO lanes (domain, route, max_in_flight, min_delay, delay_floor, delay, concurrency,
                   blocked_until, pacing, in_flight, next_at, last_lease_at)
SELECT domain, 'direct', 1073741824, 0, delay_floor, delay, concurrency,
       blocked_until, pacing, in_flight, next_at, last_lease_at
FROM domains;
UPDATE requests SET lease_route = 'direct' WHERE state = 'leased';
-- every change of a domain's route tier (up after blocks, or a probe down), for status and metrics
CREATE TABLE tier_moves (
    domain    TEXT NOT NULL,
    at        REAL NOT NULL,
    from_tier INTEGER NOT NULL,
    to_tier   INTEGER NOT NULL,
    why       TEXT NOT NULL
);

-- name: migration_0009_sessions
-- Schema version 9: sessions (identities: cookies, user agent, headers, route) held in the store,
-- per job and key (a sticky route's id, a rotating pool's name, or "direct"), so every worker
-- continues them. Retired ones are deleted.
CREATE TABLE sessions (
    job_id     INTEGER NOT NULL,
    key        TEXT NOT NULL,
    id         TEXT NOT NULL,
    data       TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (job_id, key, id)
) WITHOUT ROWID;

-- name: load_sessions
SELECT data FROM sessions WHERE job_id = ? AND key = ?;

-- name: save_session
INSERT INTO sessions (job_id, key, id, data, updated_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (job_id, key, id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at;

-- name: drop_session
DELETE FROM sessions WHERE job_id = ? AND key = ? AND id = ?;

-- name: migration_0010_page_types
-- Schema version 10: which fetcher a page type (a domain's URL pattern) needs, learnt by "auto"
-- spiders (the browser where HTTP gives nothing the spider can use), remembered fleet-wide and
-- across crawls of the job.
-- Kept by job name: what a job learnt about a site outlives a fresh start of the job.
CREATE TABLE page_types (
    job        TEXT NOT NULL,
    domain     TEXT NOT NULL,
    pattern    TEXT NOT NULL,
    fetcher    TEXT NOT NULL,
    decided_at REAL NOT NULL,
    PRIMARY KEY (job, domain, pattern)
) WITHOUT ROWID;

-- name: page_types
SELECT domain, pattern, fetcher FROM page_types WHERE job = ?;

-- name: set_page_type
INSERT INTO page_types (job, domain, pattern, fetcher, decided_at)
VALUES ((SELECT name FROM jobs WHERE id = ?), ?, ?, ?, ?)
ON CONFLICT (job, domain, pattern) DO UPDATE SET
    fetcher = excluded.fetcher, decided_at = excluded.decided_at;

-- name: capacity_domains
-- what the capacity planner needs of a job's domains: work left, limits, current tier
SELECT r.domain, sum(r.state = 'queued'), d.max_in_flight, d.min_delay, d.delay_floor, d.tier
FROM requests r JOIN domains d ON d.domain = r.domain
WHERE r.job_id = ?
GROUP BY r.domain;

-- name: capacity_lanes
-- and of their lanes for their own requests (not those only pinned requests use): the route's
-- pool, the lane's health, the route's breaker
SELECT l.domain, l.route, coalesce(rt.pool, l.route), l.tier, l.health, coalesce(rt.breaker, '{}')
FROM lanes l LEFT JOIN routes rt ON rt.id = l.route
WHERE l.domain IN (SELECT value FROM json_each(?)) AND l.shared;

-- name: work_changed
UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'work_version';

-- name: work_version
SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'work_version';

-- name: schema_version
SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version';

-- name: set_schema_version
UPDATE meta SET value = ? WHERE key = 'schema_version';

-- name: submit_job
INSERT INTO jobs (name, spider, settings, max_attempts, created_at)
VALUES (:name, :spider, :settings, :max_attempts, :now)
ON CONFLICT (name) DO UPDATE SET
    spider = excluded.spider, settings = excluded.settings, max_attempts = excluded.max_attempts;

-- name: ensure_first_run
-- a new job's first run (a job there already keeps its runs)
INSERT OR IGNORE INTO runs (job_id, run, kind, state, started_at)
SELECT id, 1, 'first', 'running', :now FROM jobs WHERE name = :name AND run = 1;

-- name: get_job
SELECT id, name, spider, state, settings, created_at, max_attempts FROM jobs WHERE name = ?;

-- name: list_jobs
SELECT id, name, spider, state, settings, created_at, max_attempts FROM jobs ORDER BY id;

-- name: set_job_state
UPDATE jobs SET state = ? WHERE name = ?;

-- name: last_request_id
-- inside the write transaction: rows inserted after this are exactly the new ones
SELECT coalesce(max(id), 0) FROM requests;

-- name: new_requests
SELECT id, url, domain, listed FROM requests WHERE id > ? AND state = 'queued' ORDER BY id;

-- name: budgets_of
SELECT kind, key, used FROM budgets
WHERE job_id = ? AND kind = ? AND key IN (SELECT value FROM json_each(?));

-- name: budget_used
INSERT INTO budgets (job_id, kind, key, used) VALUES (?, ?, ?, ?)
ON CONFLICT (job_id, kind, key) DO UPDATE SET used = excluded.used;

-- name: trap_samples
-- how many trapped URLs of each rule the job keeps as rows (policy.traps.sample_traps)
SELECT key, used FROM budgets WHERE job_id = ? AND kind = 'trap_sample';

-- name: trap_dropped
-- a trap past its rule's sample: counted per domain, rule and URL pattern, no row
INSERT INTO budgets (job_id, kind, key, used) VALUES (?, 'trap_dropped', ?, ?)
ON CONFLICT (job_id, kind, key) DO UPDATE SET used = used + excluded.used;

-- name: drop_trapped
-- a new request over its budget past its rule's sample: no row (its count is kept instead)
DELETE FROM requests WHERE id = ?;

-- name: trap_request
UPDATE requests SET state = 'dead', dead_reason = 'trap', last_error = ?, finished_at = ?
WHERE id = ?;

-- name: insert_trap
-- a link its finder judged a trap: a dead row (counted, listed, replayable), never fetched
INSERT OR IGNORE INTO requests
    (job_id, fingerprint, url, domain, priority, depth, callback, meta, method, body, fetcher,
     max_attempts, headers, pool, found_by, lastmod, listed, first_run, state, dead_reason,
     last_error, ready_at, created_at, finished_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
        (SELECT run FROM jobs WHERE id = ?1), 'dead', 'trap', ?18, ?19, ?20, ?21);

-- name: trap_history
-- every trap row inserted by this enqueue gets its one history entry
INSERT INTO attempts (request_id, n, at, outcome, status, error, route)
SELECT id, 0, :now, 'trap', NULL, last_error, NULL FROM requests
WHERE id > :after AND state = 'dead' AND dead_reason = 'trap';

-- name: insert_request
-- first_run: the run that found it (a hub is a page whose links were new in the last run)
INSERT OR IGNORE INTO requests
    (job_id, fingerprint, url, domain, priority, depth, callback, meta, method, body, fetcher,
     max_attempts, headers, pool, found_by, lastmod, listed, first_run, state, ready_at,
     created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
        (SELECT run FROM jobs WHERE id = ?1), 'queued', ?18, ?19);

-- name: insert_domain
-- first writer wins; set_domain_limits changes an existing domain
INSERT OR IGNORE INTO domains (domain, max_in_flight, min_delay, delay, concurrency)
VALUES (?1, ?2, ?3, ?4, ?2);

-- name: insert_lane
-- a domain's lane through one route (first writer wins), with the route's own limits (a cap of
-- 2^30: none); it starts at the narrower of the route's and the domain's concurrency, no faster
-- than the slower of their rates. A lane there already keeps its terms and only gains a role:
-- shared (the domain's own requests use it) or pinned (requests pinned to its pool do).
INSERT INTO lanes (domain, route, tier, max_in_flight, min_delay, delay, concurrency, shared,
                   pinned)
VALUES (:domain, :route, :tier, :max_in_flight, :min_delay, :delay, :concurrency, :shared,
        :pinned)
ON CONFLICT (domain, route) DO UPDATE SET
    shared = max(lanes.shared, excluded.shared), pinned = max(lanes.pinned, excluded.pinned)
WHERE excluded.shared > lanes.shared OR excluded.pinned > lanes.pinned;

-- name: domain_tier_init
-- a new domain is crawled on the lowest route tier it has a lane on for its own requests (not
-- one only pinned requests use)
UPDATE domains SET tier = (SELECT min(tier) FROM lanes WHERE domain = :domain AND shared)
WHERE domain = :domain
  AND NOT EXISTS (SELECT 1 FROM lanes WHERE domain = :domain AND tier = domains.tier AND shared)
  AND EXISTS (SELECT 1 FROM lanes WHERE domain = :domain AND shared);

-- name: domain_cap
SELECT max_in_flight FROM domains WHERE domain = ?;

-- name: upsert_route
INSERT INTO routes (id, pool, tier, cost) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (id) DO UPDATE SET pool = excluded.pool, tier = excluded.tier, cost = excluded.cost;

-- name: upsert_domain
-- A raised limit is granted at once; a lowered one clamps the adaptive concurrency; an unchanged
-- one (a job submitted again) keeps what pacing learned.
INSERT INTO domains (domain, max_in_flight, min_delay, delay, concurrency) VALUES (?1, ?2, ?3, ?4, ?2)
ON CONFLICT (domain) DO UPDATE SET
    concurrency = CASE WHEN excluded.max_in_flight > domains.max_in_flight
                       THEN excluded.max_in_flight
                       ELSE min(domains.concurrency, excluded.max_in_flight) END,
    max_in_flight = excluded.max_in_flight,
    min_delay = excluded.min_delay,
    delay = max(domains.delay, excluded.min_delay, domains.delay_floor);

-- name: limit_lanes
-- the domain's new limits reach its lanes: a lowered cap clamps the adaptive concurrency, a
-- raised one widens a narrower lane to where a new lane starts (the controller grows it from
-- there), the rate floor moves with the domain's
UPDATE lanes SET
    concurrency = CASE WHEN :raised
                       THEN max(concurrency, min(max_in_flight, :max_in_flight, :start))
                       ELSE min(concurrency, :max_in_flight) END,
    delay = max(delay, min_delay, :min_delay, delay_floor)
WHERE domain = :domain;

-- name: set_crawl_delay
-- the floor holds for the domain as a whole (the lease spaces starts over all its lanes by it)
-- and for each lane
UPDATE domains SET delay_floor = :floor, delay = max(delay, :floor) WHERE domain = :domain;

-- name: set_crawl_delay_lanes
UPDATE lanes SET delay_floor = :floor, delay = max(delay, :floor) WHERE domain = :domain;

-- name: pace_read
-- the lanes of a complete/fail batch, to fold its outcomes into their pacing (frontier.pacing):
-- a lane's limits are the narrower of its route's and its domain's
-- (?: a JSON array of [domain, route] pairs; the join walks the lanes' primary key)
SELECT l.domain, l.route, min(l.max_in_flight, d.max_in_flight), max(l.min_delay, d.min_delay),
       l.in_flight, l.next_at, l.delay, l.concurrency, l.blocked_until, l.delay_floor, l.pacing,
       l.health, l.tier, l.shared
FROM json_each(?) j
JOIN lanes l ON l.domain = json_extract(j.value, '$[0]') AND l.route = json_extract(j.value, '$[1]')
JOIN domains d ON d.domain = l.domain;

-- name: pace_write
UPDATE lanes SET
    in_flight = max(0, in_flight - ?), delay = ?, concurrency = ?, blocked_until = ?, pacing = ?,
    health = ?
WHERE domain = ? AND route = ?;

-- name: routes_read
SELECT id, breaker FROM routes WHERE id IN (SELECT value FROM json_each(?));

-- name: route_write
UPDATE routes SET breaker = ?, open_until = ? WHERE id = ?;

-- name: domain_tiers
-- the route tiers a batch's domains have lanes on for their own requests, and the tier each is
-- crawled on now
SELECT l.domain, d.tier, d.escalation, group_concat(DISTINCT l.tier)
FROM lanes l JOIN domains d ON d.domain = l.domain
WHERE l.domain IN (SELECT value FROM json_each(?)) AND l.shared
GROUP BY l.domain;

-- name: escalate
UPDATE domains SET tier = ?, escalation = ? WHERE domain = ?;

-- name: tier_moved
INSERT INTO tier_moves (domain, at, from_tier, to_tier, why) VALUES (?, ?, ?, ?, ?);

-- name: lane_state
SELECT l.domain, l.route, min(l.max_in_flight, d.max_in_flight), max(l.min_delay, d.min_delay),
       l.in_flight, l.next_at, l.delay, l.concurrency, l.blocked_until, l.delay_floor, l.pacing
FROM lanes l JOIN domains d ON d.domain = l.domain
WHERE l.domain = ?
ORDER BY l.route = 'direct' DESC, l.route;

-- name: rescue_expired
-- An expired lease counted its attempt when it was taken: back to the queue, or dead when that
-- was the last one (a URL that kills its worker every time must not loop forever).
UPDATE requests SET
    state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'queued' END,
    dead_reason = CASE WHEN attempts >= max_attempts THEN 'worker_lost' ELSE dead_reason END,
    last_error = 'lease expired (worker lost)',
    finished_at = CASE WHEN attempts >= max_attempts THEN :now ELSE NULL END,
    ready_at = :now,
    lease_owner = NULL
WHERE state = 'leased' AND lease_expires_at < :now
RETURNING id, domain, attempts, lease_route;

-- name: lease_lanes
-- Candidate lanes: a free in-flight slot in the lane and in its domain, not held, on the route
-- tier the domain is crawled on (or, whatever its tier, a lane requests pinned to its pool
-- were queued for, while the domain has pinned requests queued), a route whose breaker is not
-- open, a pacing slot within the horizon (the later of the lane's and the domain's next start).
-- Oldest-served first, so a domain with a million URLs cannot starve ten small ones.
-- concurrency is the lane's current (adaptive) cap; the domain's max_in_flight caps the sum of
-- its lanes; a lane's starts are spaced by its delay, a domain's by its rate and Crawl-delay.
-- shared: the lane may carry requests not pinned to a pool; tag: what the pool column of a
-- request pinned to its pool holds.
SELECT l.domain, l.route, l.concurrency - l.in_flight, d.max_in_flight - d.in_flight,
       l.delay, max(d.min_delay, d.delay_floor), max(l.next_at, d.next_at), l.concurrency,
       l.shared AND l.tier = d.tier, ',' || coalesce(r.pool, l.route) || ','
FROM lanes l INDEXED BY lanes_served
JOIN domains d ON d.domain = l.domain
LEFT JOIN routes r ON r.id = l.route
WHERE l.in_flight < l.concurrency AND d.in_flight < d.max_in_flight
  AND l.blocked_until <= :now
  AND ((l.tier = d.tier AND l.shared)
       OR (l.pinned AND EXISTS (SELECT 1 FROM requests q INDEXED BY requests_pinned
                                WHERE q.domain = l.domain AND q.state = 'queued'
                                  AND q.pool IS NOT NULL)))
  AND coalesce(r.open_until, 0) <= :now
  AND l.next_at <= :horizon AND d.next_at <= :horizon
  -- only lanes of domains with a request ready now: on a broad crawl most domains are done or
  -- wait for a retry, and each empty one took one of the :limit places, leaving a domain
  -- with work out of the lease behind hundreds of empty ones
  AND EXISTS (SELECT 1 FROM requests q INDEXED BY requests_ready
              WHERE q.domain = l.domain AND q.state = 'queued' AND q.ready_at <= :now)
ORDER BY l.last_lease_at
LIMIT :limit;

-- name: usable_lanes
-- per domain of the batch (?: a JSON array) and pool, its lanes that may carry a request now
-- (their route's breaker not open): those on the domain's route tier for its own requests, and
-- all of them for requests pinned to the pool
SELECT l.domain, coalesce(r.pool, l.route), sum(l.shared AND l.tier = d.tier), count(*)
FROM lanes l
JOIN domains d ON d.domain = l.domain
LEFT JOIN routes r ON r.id = l.route
WHERE l.domain IN (SELECT value FROM json_each(?1)) AND coalesce(r.open_until, 0) <= ?2
GROUP BY l.domain, coalesce(r.pool, l.route);

-- name: lease_pick
-- a worker leases only requests of the fetcher kinds it runs ("auto" starts as http; a
-- request escalated up the ladder names its rung: impersonate or browser); a lane
-- carries the domain's own requests if it is :shared, and those pinned to its pool (:tag); a
-- request that failed through this lane's route (a block, a refusal, a 429) waits for another
-- lane that may carry it, unless there is none (:alone for the domain's own requests,
-- :pool_alone for pinned ones)
SELECT id FROM requests INDEXED BY requests_ready
WHERE domain = :domain AND state = 'queued' AND ready_at <= :now
  AND job_id IN (SELECT value FROM json_each(:jobs))
  AND (CASE WHEN fetcher IN ('browser', 'impersonate') THEN fetcher ELSE 'http' END)
      IN (SELECT value FROM json_each(:kinds))
  AND (CASE WHEN pool IS NULL THEN :shared ELSE instr(pool, :tag) > 0 END)
  AND ((CASE WHEN pool IS NULL THEN :alone ELSE :pool_alone END)
       OR lease_route IS NULL OR lease_route <> :route)
ORDER BY priority DESC, id
LIMIT :limit;

-- name: lease_batch
-- One statement for a domain without pacing delay (every lease starts now, so they share an
-- expiry). The fencing token moves on at every lease: a holder whose lease was taken over is
-- refused.
UPDATE requests SET
    state = 'leased',
    attempts = attempts + 1,
    lease_token = lease_token + 1,
    lease_owner = :worker,
    lease_expires_at = :expires,
    lease_route = :route
WHERE id IN (
    SELECT id FROM requests INDEXED BY requests_ready
    WHERE domain = :domain AND state = 'queued' AND ready_at <= :now
      AND job_id IN (SELECT value FROM json_each(:jobs))
      AND (CASE WHEN fetcher IN ('browser', 'impersonate') THEN fetcher ELSE 'http' END)
          IN (SELECT value FROM json_each(:kinds))
      AND (CASE WHEN pool IS NULL THEN :shared ELSE instr(pool, :tag) > 0 END)
      AND ((CASE WHEN pool IS NULL THEN :alone ELSE :pool_alone END)
           OR lease_route IS NULL OR lease_route <> :route)
    ORDER BY priority DESC, id
    LIMIT :limit
)
RETURNING id, job_id, url, domain, priority, depth, callback, meta, method, body, fetcher,
          attempts, max_attempts, lease_token, headers, page;

-- name: lease_take
-- a paced lane: each lease has its own start slot and expiry
UPDATE requests SET
    state = 'leased',
    attempts = attempts + 1,
    lease_token = lease_token + 1,
    lease_owner = :worker,
    lease_expires_at = :expires,
    lease_route = :route
WHERE id = :id AND state = 'queued'
RETURNING id, job_id, url, domain, priority, depth, callback, meta, method, body, fetcher,
          attempts, max_attempts, lease_token, headers, page;

-- name: worker_seen
INSERT INTO workers (id, started_at, last_seen) VALUES (:worker, :now, :now)
ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen;

-- name: active_workers
SELECT count(*) FROM workers WHERE last_seen >= ?;

-- name: my_leases
SELECT domain, lease_route, count(*) FROM requests INDEXED BY requests_owner
WHERE lease_owner = ? AND state = 'leased'
GROUP BY domain, lease_route;

-- name: lane_leased
UPDATE lanes SET in_flight = in_flight + :n, next_at = :lane_next, last_lease_at = :now
WHERE domain = :domain AND route = :route;

-- name: domain_leased
UPDATE domains SET in_flight = in_flight + :n, next_at = max(next_at, :domain_next),
    last_lease_at = :now
WHERE domain = :domain;

-- name: lane_touched
UPDATE lanes SET last_lease_at = ? WHERE domain = ? AND route = ?;

-- name: domain_released
UPDATE domains SET in_flight = max(0, in_flight - ?) WHERE domain = ?;

-- name: lane_released
UPDATE lanes SET in_flight = max(0, in_flight - ?) WHERE domain = ? AND route = ?;

-- name: heartbeat
UPDATE requests SET lease_expires_at = max(lease_expires_at, ?)
WHERE id = ? AND lease_token = ? AND state = 'leased'
RETURNING id;

-- name: held
-- which of these leases are still held (the caller compares tokens): inside the same write
-- transaction, so nothing can change between this read and the update below
SELECT id, lease_token, job_id, domain, lease_route FROM requests
WHERE state = 'leased' AND id IN (SELECT value FROM json_each(?));

-- name: complete
-- run: the run that finished it; page: its recrawl state (validators, body hash, revisit
-- interval, last capture: the JSON the lease hands back); visit: what this fetch found
UPDATE requests SET state = 'done', status = :status, finished_at = :now, lease_owner = NULL,
    run = :run, page = coalesce(:page, page), due_at = :due_at, nbytes = :nbytes,
    visit = :visit
WHERE id = :id;

-- name: fail
-- :counted = 0 (robots.txt unreachable): the attempt the lease counted is given back
UPDATE requests SET
    state = CASE WHEN :retry_at IS NULL THEN 'dead' ELSE 'queued' END,
    attempts = attempts - (1 - :counted),
    ready_at = coalesce(:retry_at, ready_at),
    dead_reason = :dead_reason,
    last_error = :error,
    status = :status,
    finished_at = CASE WHEN :retry_at IS NULL THEN :now ELSE NULL END,
    lease_owner = NULL,
    fetcher = coalesce(:refetch, fetcher),
    run = (SELECT run FROM jobs WHERE id = requests.job_id)
WHERE id = :id AND lease_token = :token AND state = 'leased'
RETURNING domain, attempts, lease_route, job_id;

-- name: release
UPDATE requests SET state = 'queued', attempts = attempts - 1, ready_at = ?, lease_owner = NULL
WHERE id = ? AND lease_token = ? AND state = 'leased'
RETURNING domain, lease_route;

-- name: insert_attempt
INSERT INTO attempts (request_id, n, at, outcome, status, error, route) VALUES (?, ?, ?, ?, ?, ?, ?);

-- name: upsert_record
-- A record key is one record: a refetch replaces it, never duplicates it. Its status in the
-- run (?12) compares it with the version of the last run that saw it: the first write in a
-- run (records.run < ?12) compares with the stored version, a later one in the same run with
-- the run's base (previous once the run changed it, the stored version while unchanged). A
-- record back after its removal is new again. "same": equal hashes (or, for a row stored
-- before hashes, equal data).
INSERT INTO records (job_id, key, data, url, fetched_at, warc_file, warc_record_id,
                     warc_refers_to_file, warc_refers_to, hash, request_id, run, updated_at,
                     first_run, changed_run, status)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?12, ?12, 'new')
ON CONFLICT (job_id, key) DO UPDATE SET
    status = CASE
        WHEN records.run < excluded.run AND records.status = 'removed' THEN 'new'
        WHEN records.run < excluded.run
             AND (records.hash = excluded.hash
                  OR (records.hash IS NULL AND records.data = excluded.data)) THEN 'unchanged'
        WHEN records.run < excluded.run THEN 'changed'
        WHEN records.status = 'new' THEN 'new'
        WHEN records.status = 'unchanged'
             AND (records.hash = excluded.hash
                  OR (records.hash IS NULL AND records.data = excluded.data)) THEN 'unchanged'
        WHEN records.status = 'unchanged' THEN 'changed'
        WHEN records.prev_hash = excluded.hash THEN 'unchanged'
        ELSE 'changed' END,
    previous = CASE WHEN (records.run < excluded.run OR records.status = 'unchanged')
                         AND (records.status = 'removed'
                              OR NOT (records.hash IS excluded.hash
                                      OR (records.hash IS NULL AND records.data = excluded.data)))
                    THEN records.data ELSE records.previous END,
    prev_hash = CASE WHEN (records.run < excluded.run OR records.status = 'unchanged')
                          AND (records.status = 'removed'
                               OR NOT (records.hash IS excluded.hash
                                       OR (records.hash IS NULL AND records.data = excluded.data)))
                     THEN records.hash ELSE records.prev_hash END,
    changed_run = CASE WHEN (records.run < excluded.run OR records.status = 'unchanged')
                            AND (records.status = 'removed'
                                 OR NOT (records.hash IS excluded.hash
                                         OR (records.hash IS NULL
                                             AND records.data = excluded.data)))
                       THEN excluded.run ELSE records.changed_run END,
    first_run = CASE WHEN records.status = 'removed' THEN excluded.run
                     ELSE records.first_run END,
    removed_run = NULL,
    run = excluded.run,
    data = excluded.data, hash = excluded.hash, url = excluded.url,
    fetched_at = excluded.fetched_at, request_id = excluded.request_id,
    warc_file = excluded.warc_file, warc_record_id = excluded.warc_record_id,
    warc_refers_to_file = excluded.warc_refers_to_file, warc_refers_to = excluded.warc_refers_to,
    updated_at = excluded.updated_at;

-- name: keep_version
-- record_history > 1: the version a write is about to replace goes to record_versions first
-- (only a first write of the run that changes the record: what the run compares with)
INSERT INTO record_versions (job_id, key, replaced_run, data)
SELECT job_id, key, ?3, data FROM records
WHERE job_id = ?1 AND key = ?2 AND run < ?3 AND status <> 'removed'
  AND NOT (hash IS ?4);

-- name: insert_quarantine
INSERT INTO quarantine (job_id, url, data, errors, fetched_at, warc_file, warc_record_id,
                        warc_refers_to_file, warc_refers_to, run)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, (SELECT run FROM jobs WHERE id = ?1));

-- name: insert_content
INSERT OR IGNORE INTO content (job_id, hash, request_id) VALUES (?, ?, ?);

-- name: note_duplicate
-- after insert_content: a request whose content a previous request of the job had points at it
UPDATE requests SET duplicate_of = nullif(
    (SELECT request_id FROM content WHERE job_id = ?1 AND hash = ?2), ?3)
WHERE id = ?3;

-- name: count_states
SELECT
    sum(state = 'queued' AND ready_at <= :now),
    sum(state = 'queued' AND ready_at > :now),
    sum(state = 'leased'),
    sum(state = 'done'),
    sum(state = 'dead'),
    sum(attempts > 1),
    sum(CASE WHEN state IN ('done', 'dead') AND attempts > 0 THEN attempts - 1 ELSE 0 END),
    min(CASE WHEN state = 'queued' AND ready_at <= :now THEN created_at END),
    sum(duplicate_of IS NOT NULL),
    sum(state = 'done' AND status >= 400)
FROM requests WHERE job_id = :job_id;

-- name: attempts_histogram
-- finished requests by attempts taken (traps, never fetched, have 0 and are left out)
SELECT attempts, count(*) FROM requests
WHERE job_id = ? AND state IN ('done', 'dead') AND attempts > 0
GROUP BY attempts;

-- name: robots_waiting
-- the hosts whose requests wait for their robots.txt (retried without using an attempt while
-- it cannot be read): progress and status name them, so that no request waits unseen
SELECT domain, count(*), max(last_error) FROM requests
WHERE job_id = ? AND state = 'queued' AND last_error LIKE 'robots.txt unreachable (%'
GROUP BY domain ORDER BY count(*) DESC, domain LIMIT 5;

-- name: budget_traps
-- the requests a host or URL-shape budget refused: the dead(trap) rows of a budget (their URLs:
-- a sample per rule) and the counts past the sample (``domain<TAB>rule<TAB>pattern`` keys)
SELECT last_error, url, domain, 1 FROM requests
WHERE job_id = ?1 AND state = 'dead' AND dead_reason = 'trap'
  AND last_error IN ('trap: host_budget', 'trap: pattern_budget')
UNION ALL
SELECT NULL, key, NULL, used FROM budgets
WHERE job_id = ?1 AND kind = 'trap_dropped';

-- name: traps_by_domain
-- the traps (the dead(trap) rows plus those only counted, past their rule's sample) and the rows
SELECT domain, sum(n), sum(kept) FROM (
    SELECT domain, count(*) AS n, count(*) AS kept FROM requests
    WHERE job_id = ?1 AND state = 'dead' AND dead_reason = 'trap'
    GROUP BY domain
    UNION ALL
    SELECT substr(key, 1, instr(key, char(9)) - 1) AS domain, used AS n, 0 AS kept FROM budgets
    WHERE job_id = ?1 AND kind = 'trap_dropped'
)
GROUP BY domain;

-- name: count_records
SELECT (SELECT count(*) FROM records WHERE job_id = :job_id AND status <> 'removed'),
       (SELECT count(*) FROM quarantine WHERE job_id = :job_id);

-- name: unfinished
SELECT 1 FROM requests WHERE job_id = ? AND state IN ('queued', 'leased') LIMIT 1;

-- name: iter_records
SELECT key, data, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file, warc_refers_to
FROM records
WHERE job_id = ? AND key > ? AND status <> 'removed' ORDER BY key LIMIT ?;

-- name: iter_quarantine
SELECT id, data, errors, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file,
       warc_refers_to
FROM quarantine
WHERE job_id = ? AND id > ? ORDER BY id LIMIT ?;

-- name: dead_letters
SELECT r.id, j.name, r.url, r.dead_reason, r.last_error, r.attempts, r.finished_at
FROM requests r JOIN jobs j ON j.id = r.job_id
WHERE r.state = 'dead' AND (?1 IS NULL OR j.name = ?1)
  AND (?2 IS NULL OR r.dead_reason = ?2)
ORDER BY r.finished_at DESC, r.id
LIMIT ?3;

-- name: dead_letter
SELECT r.id, j.name, r.url, r.dead_reason, r.last_error, r.attempts, r.finished_at
FROM requests r JOIN jobs j ON j.id = r.job_id
WHERE r.state = 'dead' AND r.id = ?;

-- name: attempts_of
SELECT n, at, outcome, status, error, route FROM attempts WHERE request_id = ? ORDER BY n, at;

-- name: replay_dead
UPDATE requests SET state = 'queued', attempts = 0, ready_at = :now, dead_reason = NULL,
    finished_at = NULL
WHERE state = 'dead' AND id = :id;

-- name: migration_0011_records_updated
-- Schema version 11: records in update order per job, for readers that follow a crawl's records
-- as they are stored (crawl -o streams them to its file): a range of this index per poll, not
-- a scan and sort of every record of the job.
CREATE INDEX IF NOT EXISTS records_updated ON records (job_id, updated_at, key);

-- name: job_requests
SELECT count(*), sum(state = 'leased') FROM requests WHERE job_id = ?;

-- name: delete_job
-- crawl --fresh: the job and everything of it (its WARC files are not the store's), sessions
-- included, in one transaction; what it learnt of its pages' fetchers stays (page_types). The
-- attempts first, while the requests they belong to can still be found.
DELETE FROM attempts WHERE request_id IN (SELECT id FROM requests WHERE job_id = :job_id);
DELETE FROM content WHERE job_id = :job_id;
DELETE FROM budgets WHERE job_id = :job_id;
DELETE FROM records WHERE job_id = :job_id;
DELETE FROM quarantine WHERE job_id = :job_id;
DELETE FROM sessions WHERE job_id = :job_id;
DELETE FROM run_profiles WHERE job_id = :job_id;
DELETE FROM sink_progress WHERE job_id = :job_id;
DELETE FROM requests WHERE job_id = :job_id;
DELETE FROM runs WHERE job_id = :job_id;
DELETE FROM record_versions WHERE job_id = :job_id;
DELETE FROM jobs WHERE id = :job_id;

-- name: job_activity
SELECT (SELECT max(finished_at) FROM requests
        WHERE job_id = ?1 AND state IN ('done', 'dead')),
       (SELECT max(updated_at) FROM records WHERE job_id = ?1);

-- name: dead_by_reason
SELECT coalesce(dead_reason, 'too_many_retries'), count(*) FROM requests
WHERE job_id = ? AND state = 'dead'
GROUP BY 1;

-- name: lease_holders
SELECT lease_owner, count(*), max(lease_expires_at) FROM requests
WHERE job_id = ? AND state = 'leased'
GROUP BY lease_owner ORDER BY lease_owner;

-- name: records_since
-- keyset on (updated_at, key) along records_updated; a NULL key skips every record of ?2
SELECT updated_at, key, data, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file,
       warc_refers_to
FROM records
WHERE job_id = ?1 AND updated_at >= ?2
  AND (updated_at > ?2 OR (?3 IS NOT NULL AND key > ?3)) AND status <> 'removed'
ORDER BY updated_at, key
LIMIT ?4;

-- name: migration_0012_worker_stats
-- Schema version 12: what each worker process reports every few seconds (its counters as
-- crawlfleet.metrics serialises them, and its gauges), one row per process (a worker id and
-- its start time: a restarted worker of the same id adds a row, so no count is lost), kept
-- after it exits: the fleet's totals are the sums over the rows, so serve and status show them
-- without a Prometheus server; last_seen tells the live workers from the gone.
CREATE TABLE IF NOT EXISTS worker_stats (
    worker     TEXT NOT NULL,
    started_at REAL NOT NULL,
    kinds      TEXT NOT NULL,
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    last_seen  REAL NOT NULL,
    counters   TEXT NOT NULL,
    gauges     TEXT NOT NULL,
    PRIMARY KEY (worker, started_at)
) WITHOUT ROWID;

-- name: migration_0015_request_headers
-- Schema version 15: a request's own headers (a spider's ``Request(headers=...)``, a form's
-- Content-Type), as a JSON object; NULL for the many requests that have none. Sent as they are
-- by the fetcher, under the address guard and the session's cookies.
ALTER TABLE requests ADD COLUMN headers TEXT;

-- name: save_worker_stats
INSERT INTO worker_stats (worker, started_at, kinds, host, pid, last_seen, counters, gauges)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (worker, started_at) DO UPDATE SET
    kinds = excluded.kinds, last_seen = excluded.last_seen,
    counters = excluded.counters, gauges = excluded.gauges;

-- name: worker_stats
SELECT worker, started_at, kinds, host, pid, last_seen, counters, gauges
FROM worker_stats WHERE last_seen >= ? ORDER BY worker, started_at;

-- name: queue_by_domain
-- The backlog per job and domain, and when each one's oldest ready request was queued. Only
-- unfinished rows are read: requests_job_state narrows every job to its queued and leased ones,
-- so the cost follows the backlog, not the crawl's history (CROSS JOIN keeps SQLite's planner
-- from scanning every request instead: jobs are few, requests many).
SELECT j.name, r.domain,
       sum(r.state = 'queued' AND r.ready_at <= ?1),
       sum(r.state = 'queued' AND r.ready_at > ?1),
       sum(r.state = 'leased'),
       min(CASE WHEN r.state = 'queued' AND r.ready_at <= ?1 THEN r.created_at END)
FROM jobs j CROSS JOIN requests r ON r.job_id = j.id AND r.state IN ('queued', 'leased')
GROUP BY j.name, r.domain;

-- name: lane_rows
-- every lane with its route's pool and its domain's caps, the most recently served first
SELECT l.domain, l.route, coalesce(r.pool, l.route), l.tier, l.in_flight, l.concurrency,
       l.max_in_flight, l.delay, l.next_at, l.blocked_until, l.health,
       d.tier, d.in_flight, d.max_in_flight
FROM lanes l JOIN domains d ON d.domain = l.domain LEFT JOIN routes r ON r.id = l.route
ORDER BY l.last_lease_at DESC, l.domain, l.route
LIMIT ?;

-- name: route_rows
SELECT id, pool, tier, breaker, open_until FROM routes ORDER BY pool, id;

-- name: attempts_by_outcome
-- the attempts history holds failed attempts only: blocks, errors, expired leases
SELECT outcome, count(*) FROM attempts GROUP BY outcome;

-- name: tier_move_counts
SELECT coalesce(sum(to_tier > from_tier), 0), coalesce(sum(to_tier < from_tier), 0)
FROM tier_moves;

-- name: blocked_attempts
-- from the (failed attempts only) history to its requests, never the other way round: CROSS
-- JOIN fixes that order, one primary-key probe per failed attempt
SELECT count(*) FROM attempts a CROSS JOIN requests r ON r.id = a.request_id
WHERE r.job_id = ? AND a.outcome = 'blocked';

-- name: quarantine_items
SELECT q.id, j.name, q.url, q.data, q.errors, q.fetched_at, q.warc_file, q.warc_record_id,
       q.warc_refers_to_file, q.warc_refers_to
FROM quarantine q JOIN jobs j ON j.id = q.job_id
WHERE (?1 IS NULL OR j.name = ?1)
ORDER BY q.id DESC
LIMIT ?2;

-- name: quarantine_item
SELECT q.id, j.name, q.url, q.data, q.errors, q.fetched_at, q.warc_file, q.warc_record_id,
       q.warc_refers_to_file, q.warc_refers_to
FROM quarantine q JOIN jobs j ON j.id = q.job_id
WHERE q.id = ?;

-- name: migration_0017_pinned_requests
-- Schema version 17: a request may be pinned to route pools (Request(pool=...)): its pool
-- column holds their names as ",a,b," (NULL: not pinned), and it is leased only on lanes whose
-- route is in one of them, whatever the domain's route tier. A lane is shared (the domain's own
-- requests use it: every lane so far) and/or pinned (requests pinned to its route's pool were
-- queued for its domain: it is leased on whatever its tier).
ALTER TABLE requests ADD COLUMN pool TEXT;
ALTER TABLE lanes ADD COLUMN shared INTEGER NOT NULL DEFAULT 1;
ALTER TABLE lanes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
-- whether a domain has pinned requests queued at all: a lane only they use is passed over when
-- it has none (without reading the domain's other requests)
CREATE INDEX requests_pinned ON requests (domain, priority DESC, id)
    WHERE state = 'queued' AND pool IS NOT NULL;

-- name: migration_0020_runs
-- Schema version 20: recurring crawls. A job has runs (run 1 its first crawl; crawl --recrawl,
-- a schedule or --fresh start the next); jobs.run is the current one. A run's counters are read
-- from the rows it touched while it goes, and kept in its row once it finished.
-- Requests: the run that last finished it (run), the run that found it and the page that did
-- (first_run, found_by: a hub is a page whose links were new in the last run), its recrawl
-- state as the worker keeps it (page: validators, body hash, revisit interval, last capture),
-- when it is due again (due_at: NULL revisits it every run), what its last visit found (visit:
-- new, changed, unchanged, not_modified), the bytes of that fetch, and what a sitemap said of
-- it (listed: a sitemap lists it, outside the URL-shape budget; lastmod).
-- Records: their status in the latest run that touched them (new, changed, unchanged, removed),
-- the run that last wrote them (run), that first had them, that last changed them, that removed
-- them; the hash of their fields; the version before the last change (previous); the request
-- whose page yields them (request_id). Older versions go to record_versions when the job keeps
-- more than one (record_history).
ALTER TABLE jobs ADD COLUMN run INTEGER NOT NULL DEFAULT 1;
CREATE TABLE runs (
    job_id            INTEGER NOT NULL,
    run               INTEGER NOT NULL,
    kind              TEXT NOT NULL,
    state             TEXT NOT NULL DEFAULT 'running',
    started_at        REAL NOT NULL,
    finished_at       REAL,
    schedule          TEXT,
    counters          TEXT,
    PRIMARY KEY (job_id, run)
) WITHOUT ROWID;
INSERT INTO runs (job_id, run, kind, state, started_at) SELECT id, 1, 'first', 'running', created_at FROM jobs;
ALTER TABLE requests ADD COLUMN run INTEGER;
ALTER TABLE requests ADD COLUMN first_run INTEGER NOT NULL DEFAULT 1;
ALTER TABLE requests ADD COLUMN found_by INTEGER;
ALTER TABLE requests ADD COLUMN page TEXT;
ALTER TABLE requests ADD COLUMN due_at REAL;
ALTER TABLE requests ADD COLUMN visit TEXT;
ALTER TABLE requests ADD COLUMN nbytes INTEGER;
ALTER TABLE requests ADD COLUMN listed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE requests ADD COLUMN lastmod REAL;
UPDATE requests SET run = 1 WHERE state IN ('done', 'dead');
ALTER TABLE records ADD COLUMN hash BLOB;
ALTER TABLE records ADD COLUMN status TEXT NOT NULL DEFAULT 'new';
ALTER TABLE records ADD COLUMN run INTEGER NOT NULL DEFAULT 1;
ALTER TABLE records ADD COLUMN first_run INTEGER NOT NULL DEFAULT 1;
ALTER TABLE records ADD COLUMN changed_run INTEGER NOT NULL DEFAULT 1;
ALTER TABLE records ADD COLUMN removed_run INTEGER;
ALTER TABLE records ADD COLUMN previous TEXT;
ALTER TABLE records ADD COLUMN prev_hash BLOB;
ALTER TABLE records ADD COLUMN request_id INTEGER;
-- a 304 carries its page's records over; a run's end finds the records its pages no longer yield
CREATE INDEX records_request ON records (job_id, request_id);
ALTER TABLE quarantine ADD COLUMN run INTEGER NOT NULL DEFAULT 1;
CREATE TABLE record_versions (
    id           INTEGER PRIMARY KEY,
    job_id       INTEGER NOT NULL,
    key          TEXT NOT NULL,
    replaced_run INTEGER NOT NULL,
    data         TEXT NOT NULL
);
CREATE INDEX record_versions_key ON record_versions (job_id, key, replaced_run);

-- name: migration_0021_schedules
-- Schema version 21: schedules, one per job (by name), in the store so a fleet has one. next_at
-- is when the next run is due; whoever runs with the store starts it and moves next_at on in
-- the same transaction (exactly once). queued: a due run waits for the last one to finish
-- (overlap = queue).
CREATE TABLE schedules (
    job        TEXT PRIMARY KEY,
    spider     TEXT NOT NULL,
    every      REAL,
    cron       TEXT,
    tz         TEXT NOT NULL DEFAULT 'UTC',
    anchor     REAL NOT NULL,
    overlap    TEXT NOT NULL DEFAULT 'skip',
    next_at    REAL NOT NULL,
    queued     INTEGER NOT NULL DEFAULT 0,
    last_at    REAL,
    last_run   INTEGER,
    last_note  TEXT,
    created_at REAL NOT NULL
) WITHOUT ROWID;

-- name: job_runs
SELECT id, run FROM jobs;

-- name: carry_records
-- a page that did not change (a 304, or the same body when the spider skips those): its records
-- are carried over into the run, unchanged (their update time stays: nothing new was stored)
UPDATE records SET run = :run, status = 'unchanged'
WHERE job_id = :job_id AND request_id = :id AND run < :run AND status <> 'removed';

-- name: run_of_job
SELECT run FROM jobs WHERE id = ?;

-- name: relist
-- a page a sitemap lists again with a newer lastmod: revisited in this run, due or not
UPDATE requests SET
    lastmod = :lastmod, listed = 1,
    state = CASE WHEN state = 'done' AND coalesce(run, 0) < :run THEN 'queued' ELSE state END,
    ready_at = CASE WHEN state = 'done' AND coalesce(run, 0) < :run THEN :now ELSE ready_at END,
    attempts = CASE WHEN state = 'done' AND coalesce(run, 0) < :run THEN 0 ELSE attempts END
WHERE job_id = :job_id AND fingerprint = :fingerprint AND (lastmod IS NULL OR lastmod < :lastmod);

-- name: current_run
SELECT r.job_id, j.name, r.run, r.kind, r.state, r.started_at, r.finished_at, r.schedule,
       r.counters
FROM runs r JOIN jobs j ON j.id = r.job_id
WHERE r.job_id = ? AND r.run = j.run;

-- name: runs_of
SELECT r.job_id, j.name, r.run, r.kind, r.state, r.started_at, r.finished_at, r.schedule,
       r.counters
FROM runs r JOIN jobs j ON j.id = r.job_id
WHERE r.job_id = ? ORDER BY r.run DESC LIMIT ?;

-- name: running_runs
SELECT j.id, j.name, j.run, r.kind FROM jobs j JOIN runs r ON r.job_id = j.id AND r.run = j.run
WHERE r.state = 'running';

-- name: run_pages
-- what a run did to the requests (its pages, by what their visit found)
SELECT sum(state = 'done'),
       sum(state = 'done' AND visit = 'not_modified'),
       sum(state = 'done' AND visit = 'unchanged'),
       sum(state = 'done' AND visit = 'changed'),
       sum(state = 'done' AND visit = 'new'),
       sum(state = 'done' AND status >= 400),
       sum(state = 'dead'),
       sum(CASE WHEN state = 'done' THEN coalesce(nbytes, 0) ELSE 0 END)
FROM requests WHERE job_id = :job_id AND run = :run;

-- name: run_records
SELECT sum(run = :run AND status = 'new'),
       sum(run = :run AND status = 'changed'),
       sum(run = :run AND status = 'unchanged'),
       sum(status = 'removed' AND removed_run = :run),
       (SELECT count(*) FROM quarantine WHERE job_id = :job_id AND run = :run)
FROM records WHERE job_id = :job_id;

-- name: mark_removed
-- the end of a run: records whose page it fetched (done: a 404 or 410 too) and that no page
-- yielded in it are removed, kept with their last values
UPDATE records SET status = 'removed', removed_run = :run
WHERE job_id = :job_id AND run < :run AND status <> 'removed'
  AND request_id IN (SELECT id FROM requests WHERE job_id = :job_id AND run = :run
                                                 AND state = 'done');

-- name: fresh_replace
-- the end of a --fresh run: what it did not find again goes, and what it found starts its
-- history anew
DELETE FROM records WHERE job_id = :job_id AND run < :run;
UPDATE records SET status = 'new', previous = NULL, prev_hash = NULL, first_run = :run,
    changed_run = :run, removed_run = NULL
WHERE job_id = :job_id;
DELETE FROM record_versions WHERE job_id = :job_id;
DELETE FROM quarantine WHERE job_id = :job_id AND run < :run;

-- name: trim_versions
-- record_history = N: the newest N older versions of each record stay (previous is the newest)
DELETE FROM record_versions WHERE id IN (
    SELECT id FROM (
        SELECT id, row_number() OVER (PARTITION BY key ORDER BY replaced_run DESC, id DESC) AS n
        FROM record_versions WHERE job_id = :job_id)
    WHERE n > :keep);

-- name: finish_run
UPDATE runs SET state = 'finished', finished_at = :now, counters = :counters
WHERE job_id = :job_id AND run = :run AND state = 'running';

-- name: abandon_run
UPDATE runs SET state = 'abandoned', finished_at = :now, counters = :counters
WHERE job_id = :job_id AND run = :run AND state = 'running';

-- name: insert_run
INSERT INTO runs (job_id, run, kind, state, started_at, schedule)
VALUES (:job_id, :run, :kind, 'running', :now, :schedule);

-- name: set_job_run
UPDATE jobs SET run = :run WHERE id = :job_id;

-- name: requeue_due
-- a new run revisits the job's pages that are due (revisit.is_due: no interval, due by now, a
-- seed, or a hub: a page that found pages new in the last run); its attempts start afresh
UPDATE requests SET state = 'queued', ready_at = :now, attempts = 0, lease_owner = NULL,
    finished_at = NULL, dead_reason = NULL, last_error = NULL
WHERE job_id = :job_id AND state = 'done'
  AND (due_at IS NULL OR due_at <= :now OR depth = 0
       OR id IN (SELECT found_by FROM requests
                 WHERE job_id = :job_id AND first_run = :last AND found_by IS NOT NULL));

-- name: drop_requests
-- --fresh: the job's requests and their history go when its new run starts; its records and
-- quarantine stay readable until that run finished (fresh_replace)
DELETE FROM attempts WHERE request_id IN (SELECT id FROM requests WHERE job_id = :job_id);
DELETE FROM content WHERE job_id = :job_id;
DELETE FROM budgets WHERE job_id = :job_id;
DELETE FROM sessions WHERE job_id = :job_id;
DELETE FROM requests WHERE job_id = :job_id;

-- name: iter_all_records
-- export --removed: every record with its status, the removed ones too
SELECT key, data, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file,
       warc_refers_to, status, run, first_run, changed_run, removed_run, previous
FROM records
WHERE job_id = ? AND key > ? ORDER BY key LIMIT ?;

-- name: iter_changes
-- export --changes [--since RUN]: records new, changed or removed in a run since :since
SELECT key, data, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file,
       warc_refers_to, status, run, first_run, changed_run, removed_run, previous
FROM records
WHERE job_id = :job_id AND key > :after
  AND (changed_run >= :since OR first_run >= :since OR removed_run >= :since)
ORDER BY key LIMIT :limit;

-- name: versions_since
-- the oldest version of each of these records replaced in a run since :since: what it was
-- before those runs
SELECT key, data FROM (
    SELECT key, data, row_number() OVER (PARTITION BY key ORDER BY replaced_run, id) AS n
    FROM record_versions
    WHERE job_id = :job_id AND replaced_run >= :since
      AND key IN (SELECT value FROM json_each(:keys)))
WHERE n = 1;

-- name: list_schedules
SELECT job, spider, every, cron, tz, anchor, overlap, next_at, queued, last_at, last_run,
       last_note, created_at
FROM schedules ORDER BY job;

-- name: upsert_schedule
INSERT INTO schedules (job, spider, every, cron, tz, anchor, overlap, next_at, created_at)
VALUES (:job, :spider, :every, :cron, :tz, :anchor, :overlap, :next_at, :now)
ON CONFLICT (job) DO UPDATE SET
    spider = excluded.spider, every = excluded.every, cron = excluded.cron, tz = excluded.tz,
    anchor = excluded.anchor, overlap = excluded.overlap, next_at = excluded.next_at,
    queued = 0;

-- name: delete_schedule
DELETE FROM schedules WHERE job = ?;

-- name: due_schedules
SELECT job, spider, every, cron, tz, anchor, overlap, next_at, queued, last_at, last_run,
       last_note, created_at
FROM schedules WHERE next_at <= :now OR queued = 1 ORDER BY next_at;

-- name: schedule_ran
UPDATE schedules SET next_at = :next_at, queued = :queued, last_at = coalesce(:last_at, last_at),
    last_run = coalesce(:last_run, last_run), last_note = :note
WHERE job = :job;

-- name: migration_0030_outbox
-- Schema version 30: what leaves the machine goes through an outbox in the store. An event
-- (an alert, a run's summary, a batch of a run's changed records) is one row of outbox_events,
-- its body the JSON every destination is sent as it is, its key the Idempotency-Key (unique: an
-- event written twice, by two processes that found the same breach, is one). Each destination
-- it goes to (a webhook, Slack, mail, a records sink; by a stable id, never its URL) is one row
-- of outbox, leased like a request (token, expiry): a process that dies mid-delivery loses
-- nothing, its lease expires and another takes the row over.
CREATE TABLE outbox_events (
    id         INTEGER PRIMARY KEY,
    key        TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL,
    job        TEXT,
    run        INTEGER,
    body       TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE outbox (
    id               INTEGER PRIMARY KEY,
    event_id         INTEGER NOT NULL,
    destination      TEXT NOT NULL,
    state            TEXT NOT NULL DEFAULT 'queued',
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    ready_at         REAL NOT NULL,
    lease_owner      TEXT,
    lease_token      INTEGER NOT NULL DEFAULT 0,
    lease_expires_at REAL,
    last_status      INTEGER,
    last_error       TEXT,
    created_at       REAL NOT NULL,
    done_at          REAL,
    UNIQUE (event_id, destination)
);
-- the deliverer's pick: ready rows of the destinations it knows, oldest first
CREATE INDEX outbox_ready ON outbox (destination, ready_at, id) WHERE state = 'queued';
-- leases of processes that died
CREATE INDEX outbox_leased ON outbox (lease_expires_at) WHERE state = 'leased';

-- name: migration_0031_run_profiles
-- Schema version 31: each run's data profile (crawlfleet.data.profile, as JSON), computed while
-- the run goes (checked_at: one process of the fleet checks a run at a time, every [quality]
-- check_every seconds) and once more when it has finished (final: exactly once, in the
-- transaction that writes the run's events).
CREATE TABLE run_profiles (
    job_id     INTEGER NOT NULL,
    run        INTEGER NOT NULL,
    profile    TEXT,
    final      INTEGER NOT NULL DEFAULT 0,
    checked_at REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, run)
) WITHOUT ROWID;

-- name: migration_0032_sink_progress
-- Schema version 32: how far each records sink got through a finished run's changes: the key
-- after which the next batch starts and how many batches were written. A batch is an outbox
-- event (key changes:JOB:RUN:SINK:N) written in the transaction that moves this on, so a
-- process that dies half way leaves the rest to the next one, and none is written twice.
CREATE TABLE sink_progress (
    job_id    INTEGER NOT NULL,
    run       INTEGER NOT NULL,
    sink      TEXT NOT NULL,
    after_key TEXT NOT NULL DEFAULT '',
    batches   INTEGER NOT NULL DEFAULT 0,
    done      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, run, sink)
) WITHOUT ROWID;

-- name: emit_event
INSERT INTO outbox_events (key, kind, job, run, body, created_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO NOTHING
RETURNING id;

-- name: emit_delivery
INSERT INTO outbox (event_id, destination, max_attempts, ready_at, created_at)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (event_id, destination) DO NOTHING;

-- name: outbox_lost
-- a delivery whose holder died with its last attempt: dead, with why
UPDATE outbox SET state = 'dead', lease_owner = NULL, done_at = :now,
    last_error = coalesce(last_error || ' | ', '') || 'delivery lost (the process sending it died)'
WHERE state = 'leased' AND lease_expires_at < :now AND attempts >= max_attempts;

-- name: outbox_lease
-- ready deliveries of the destinations this process knows, and those whose holder died (an
-- expired lease: the attempt it counted stays counted), oldest first
UPDATE outbox SET
    state = 'leased',
    attempts = attempts + 1,
    lease_token = lease_token + 1,
    lease_owner = :owner,
    lease_expires_at = :expires
WHERE id IN (
    SELECT id FROM outbox
    WHERE destination IN (SELECT value FROM json_each(:destinations))
      AND ((state = 'queued' AND ready_at <= :now)
           OR (state = 'leased' AND lease_expires_at < :now))
    ORDER BY ready_at, id
    LIMIT :limit
)
RETURNING id, lease_token, destination, attempts, max_attempts, event_id;

-- name: outbox_bodies
SELECT id, key, kind, job, run, body FROM outbox_events
WHERE id IN (SELECT value FROM json_each(?));

-- name: outbox_settle
-- fenced by the token: a holder whose lease was taken over writes nothing
UPDATE outbox SET
    state = :state,
    ready_at = coalesce(:retry_at, ready_at),
    last_status = :status,
    last_error = :error,
    lease_owner = NULL,
    done_at = CASE WHEN :state IN ('done', 'dead') THEN :now ELSE NULL END
WHERE id = :id AND lease_token = :token AND state = 'leased';

-- name: outbox_replay
UPDATE outbox SET state = 'queued', attempts = 0, ready_at = :now, done_at = NULL
WHERE state = 'dead' AND (:destination IS NULL OR destination = :destination)
  AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)));

-- name: outbox_prune
-- delivered (or dead) long ago: the deliveries, then the events none of whose rows is left
DELETE FROM outbox WHERE state IN ('done', 'dead') AND done_at < ?;

-- name: outbox_prune_events
DELETE FROM outbox_events
WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.event_id = outbox_events.id);

-- name: outbox_counts
-- per destination: deliveries by state, the oldest ready one, the newest error
SELECT destination,
       sum(state = 'queued'), sum(state = 'leased'), sum(state = 'done'), sum(state = 'dead'),
       min(CASE WHEN state = 'queued' THEN created_at END),
       (SELECT last_error FROM outbox o2 WHERE o2.destination = o.destination
          AND o2.last_error IS NOT NULL ORDER BY coalesce(o2.done_at, o2.ready_at) DESC LIMIT 1)
FROM outbox o
GROUP BY destination
ORDER BY destination;

-- name: outbox_dead
SELECT o.id, o.destination, e.key, e.kind, e.job, e.run, o.attempts, o.last_status,
       o.last_error, o.done_at
FROM outbox o JOIN outbox_events e ON e.id = o.event_id
WHERE o.state = 'dead'
ORDER BY o.done_at DESC, o.id
LIMIT ?;

-- name: outbox_events_of
SELECT key, kind, job, run, body, created_at FROM outbox_events
WHERE (?1 IS NULL OR job = ?1) AND (?2 IS NULL OR kind = ?2)
ORDER BY id DESC
LIMIT ?3;

-- name: profile_claim
-- a check of a running run, by one process of the fleet at a time: the row is taken when it
-- was last checked :every seconds ago (or never) and is not final
INSERT INTO run_profiles (job_id, run, checked_at) VALUES (:job_id, :run, 0)
ON CONFLICT (job_id, run) DO NOTHING;
UPDATE run_profiles SET checked_at = :now
WHERE job_id = :job_id AND run = :run AND final = 0 AND checked_at <= :now - :every;

-- name: profile_save
-- a check's profile; never over a final one
UPDATE run_profiles SET profile = ? WHERE job_id = ? AND run = ? AND final = 0;

-- name: profile_finalize
-- the run's last profile: once, whoever gets here first
INSERT INTO run_profiles (job_id, run, checked_at) VALUES (:job_id, :run, :now)
ON CONFLICT (job_id, run) DO NOTHING;
UPDATE run_profiles SET profile = :profile, final = 1, checked_at = :now
WHERE job_id = :job_id AND run = :run AND final = 0;

-- name: profiles_of
SELECT run, profile, final FROM run_profiles
WHERE job_id = ? AND profile IS NOT NULL
ORDER BY run DESC
LIMIT ?;

-- name: profile_fields
-- one pass over a run's records for every top-level field: present (any value), filled (not
-- null, empty or blank), filled texts and their distinct values, numbers and their range
SELECT j.key,
       count(*),
       sum(CASE j.type WHEN 'null' THEN 0
                       WHEN 'text' THEN trim(j.value, ' ' || char(9, 10, 13)) <> ''
                       WHEN 'array' THEN j.value <> '[]'
                       WHEN 'object' THEN j.value <> '{}'
                       ELSE 1 END),
       sum(j.type = 'text' AND trim(j.value, ' ' || char(9, 10, 13)) <> ''),
       count(DISTINCT CASE WHEN j.type = 'text' AND trim(j.value, ' ' || char(9, 10, 13)) <> '' THEN j.value END),
       sum(j.type IN ('integer', 'real')),
       min(CASE WHEN j.type IN ('integer', 'real') THEN j.value END),
       max(CASE WHEN j.type IN ('integer', 'real') THEN j.value END),
       NULL
FROM records r, json_each(r.data) j
WHERE r.job_id = ?1 AND r.run = ?2 AND r.status <> 'removed'
GROUP BY j.key;

-- name: profile_median
-- SQLite has no median: the middle one (or two) of a field's numbers, in order
SELECT avg(v) FROM (
    SELECT j.value AS v FROM records r, json_each(r.data) j
    WHERE r.job_id = ?1 AND j.key = ?2 AND j.type IN ('integer', 'real')
      AND r.run = ?4 AND r.status <> 'removed'
    ORDER BY v
    LIMIT 2 - (?3 % 2) OFFSET (?3 - 1) / 2
);

-- name: profile_records
-- a run's records (those it wrote or carried over, not those it removed) and its quarantine
SELECT (SELECT count(*) FROM records WHERE job_id = ?1 AND run = ?2 AND status <> 'removed'),
       (SELECT count(*) FROM quarantine WHERE job_id = ?1 AND run = ?2);

-- name: run_requests
-- what a run's requests cost: retries over its finished ones, its traps (dead, never
-- fetched), and the attempts of the job answered with blocks since the run started
SELECT coalesce(sum(CASE WHEN state IN ('done', 'dead') AND attempts > 0
                         THEN attempts - 1 ELSE 0 END), 0),
       coalesce(sum(state = 'dead' AND dead_reason = 'trap'), 0),
       (SELECT count(*) FROM attempts a CROSS JOIN requests q ON q.id = a.request_id
        WHERE q.job_id = ?1 AND a.outcome = 'blocked' AND a.at >= ?3)
FROM requests WHERE job_id = ?1 AND run = ?2;

-- name: quarantine_reasons
SELECT coalesce(json_extract(errors, '$[0].type'), 'invalid'), count(*) FROM quarantine
WHERE job_id = ?1 AND run = ?2
GROUP BY 1;

-- name: records_missing
-- examples of a breach of a field's coverage: records without it (filled as profile_fields
-- counts it), with their page and WARC record
SELECT key, data, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file, warc_refers_to
FROM records
WHERE job_id = ?1 AND run = ?4 AND status <> 'removed' AND NOT EXISTS (
    SELECT 1 FROM json_each(records.data) j
    WHERE j.key = ?2
      AND CASE j.type WHEN 'null' THEN 0
                      WHEN 'text' THEN trim(j.value, ' ' || char(9, 10, 13)) <> ''
                      WHEN 'array' THEN j.value <> '[]'
                      WHEN 'object' THEN j.value <> '{}'
                      ELSE 1 END)
ORDER BY key
LIMIT ?3;

-- name: blocked_examples
-- examples of a block-rate breach: requests of the job answered with blocks since :since
SELECT r.url, max(a.at), count(*) FROM attempts a CROSS JOIN requests r ON r.id = a.request_id
WHERE r.job_id = ?1 AND a.outcome = 'blocked' AND a.at >= ?2
GROUP BY r.url
ORDER BY max(a.at) DESC
LIMIT ?3;

-- name: sink_start
INSERT INTO sink_progress (job_id, run, sink) VALUES (?, ?, ?)
ON CONFLICT (job_id, run, sink) DO NOTHING;

-- name: sink_state
SELECT after_key, batches, done FROM sink_progress WHERE job_id = ? AND run = ? AND sink = ?;

-- name: sink_advance
-- the batch that follows :batches, once: a second process building the same batch moves
-- nothing (and its event, of the same key, is not written)
UPDATE sink_progress SET after_key = :after, batches = batches + :added, done = :done
WHERE job_id = :job_id AND run = :run AND sink = :sink AND batches = :batches AND done = 0;

-- name: sink_records
-- the next batch of a run's changes for a sink, by key: the records new or changed in it, and
-- those it removed (with their last values), each with its status and the version before
SELECT key, data, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file, warc_refers_to,
       status, previous
FROM records
WHERE job_id = ?1 AND key > ?2
  AND ((run = ?4 AND status IN ('new', 'changed')) OR (status = 'removed' AND removed_run = ?4))
ORDER BY key
LIMIT ?3;

-- name: migration_0045_robots_files
-- Schema version 45: the robots.txt each origin answered, shared by the fleet: a worker that
-- meets a host asks the store first, and fetches the file only when no worker has within its
-- lifetime (RobotsCache ttl). Only definite answers are kept: a file read (state ok, its text;
-- a file cut at the size limit is kept cut at its last whole line) or none to read (a 4xx or
-- too many redirects: allow_all). An unreachable one is the host's passing state, re-checked
-- by each worker. fetched_at: the store's clock.
CREATE TABLE robots_files (
    origin     TEXT PRIMARY KEY,
    state      TEXT NOT NULL,
    body       TEXT NOT NULL DEFAULT '',
    fetched_at REAL NOT NULL
) WITHOUT ROWID;

-- name: robots_file
-- the origin's shared robots.txt and its age in seconds
SELECT state, body, ?2 - fetched_at FROM robots_files WHERE origin = ?1;

-- name: save_robots_file
INSERT INTO robots_files (origin, state, body, fetched_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (origin) DO UPDATE SET
    state = excluded.state, body = excluded.body, fetched_at = excluded.fetched_at;

-- name: migration_0046_hosts_down
-- Schema version 46: the hosts no worker of the fleet could connect to (refused, no DNS name,
-- no connection in time), and since when: the give-up of a dead host (pacing.host_give_up) is
-- counted from the fleet's first failure, not from each worker's, so a host's requests end
-- dead(host_unreachable) on one clock whichever worker holds them. since: the first failure
-- of those in a row; seen: the latest; tries: how many (every worker's). A host not seen down for a while (the caller's window)
-- starts again. The store's clock.
CREATE TABLE hosts_down (
    origin TEXT PRIMARY KEY,
    since  REAL NOT NULL,
    seen   REAL NOT NULL,
    tries  INTEGER NOT NULL DEFAULT 1
) WITHOUT ROWID;

-- name: host_down
-- a worker could not connect to the origin now: its seconds down for the fleet, and its tries
INSERT INTO hosts_down (origin, since, seen, tries) VALUES (?1, ?2, ?2, 1)
ON CONFLICT (origin) DO UPDATE SET
    since = CASE WHEN ?2 - hosts_down.seen > ?3 THEN ?2 ELSE hosts_down.since END,
    tries = CASE WHEN ?2 - hosts_down.seen > ?3 THEN 1 ELSE hosts_down.tries + 1 END,
    seen = max(hosts_down.seen, ?2)
RETURNING ?2 - since, tries;
