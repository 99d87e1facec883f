-- The PostgreSQL frontier: many workers on many machines share one database.
--
-- Conventions of this file:
-- * Every time is the caller's clock (double precision epoch seconds), passed as a parameter, never
--   now(): one clock for the whole contract, and a fake one in the tests.
-- * Batches travel as arrays (unnest): one statement per batch, never one round trip per row.
-- * Lock order is fixed to keep concurrent transactions out of deadlocks: request rows before
--   domain rows, and several domain rows always in domain order. The lease is the exception that
--   proves it: it takes domain rows first, but only with SKIP LOCKED, so it never waits for one.
-- * Blocks named migration_NNNN are the versioned schema, applied in order by upgrade() under an
--   advisory lock; a released migration is never edited, a change is a new block.

-- name: meta_table
CREATE TABLE IF NOT EXISTS crawlfleet_meta (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at double precision NOT NULL
);

-- name: migration_0001_initial
CREATE TABLE jobs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text NOT NULL UNIQUE,
    spider       text NOT NULL,
    state        text NOT NULL DEFAULT 'running',
    settings     jsonb NOT NULL DEFAULT '{}',
    max_attempts integer NOT NULL DEFAULT 5,
    created_at   double precision NOT NULL
);

-- Politeness is per domain across every job and worker: the store, not a process, holds it.
-- delay is the current (adaptive) gap between request starts; next_at the earliest next start.
-- Domain names are compared bytewise (COLLATE "C"): cheaper, and the same order everywhere.
CREATE TABLE domains (
    domain        text COLLATE "C" PRIMARY KEY,
    max_in_flight integer NOT NULL,
    min_delay     double precision NOT NULL,
    delay         double precision NOT NULL,
    in_flight     integer NOT NULL DEFAULT 0,
    next_at       double precision NOT NULL DEFAULT 0,
    blocked_until double precision NOT NULL DEFAULT 0,
    last_lease_at double precision NOT NULL DEFAULT 0
);
-- the lease walks domains oldest-served first and stops as soon as its batch is full: with this
-- index it reads a handful of domains instead of sorting all of them on every lease
CREATE INDEX domains_served ON domains (last_lease_at, domain);

CREATE TABLE requests (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id           bigint NOT NULL REFERENCES jobs (id),
    fingerprint      bytea NOT NULL,
    url              text NOT NULL,
    domain           text COLLATE "C" NOT NULL,
    priority         integer NOT NULL DEFAULT 0,
    depth            integer NOT NULL DEFAULT 0,
    callback         text,
    meta             jsonb,
    method           text NOT NULL DEFAULT 'GET',
    body             bytea,
    fetcher          text,
    state            text NOT NULL DEFAULT 'queued',
    ready_at         double precision NOT NULL DEFAULT 0,
    attempts         integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL,
    lease_owner      text,
    lease_token      bigint NOT NULL DEFAULT 0,
    lease_expires_at double precision,
    status           integer,
    dead_reason      text,
    last_error       text,
    created_at       double precision NOT NULL,
    finished_at      double precision,
    -- the final arbiter of URL dedup: workers dedupe in memory first, this catches the rest
    CONSTRAINT requests_fingerprint UNIQUE (job_id, fingerprint)
);
-- The lease reads the best ready requests of one domain. Partial: done and dead rows (the bulk
-- of a long crawl) stay out of it, so it stays small and hot however big the crawl grows.
CREATE INDEX requests_ready ON requests (domain, priority DESC, id) WHERE state = 'queued';
-- rescue reads only live leases, oldest expiry first
CREATE INDEX requests_leased ON requests (lease_expires_at) WHERE state = 'leased';
-- stats, is_finished, dead letters: per job and state
CREATE INDEX requests_job_state ON requests (job_id, state);

-- failed attempts only (successes are the common case and need no history row)
CREATE TABLE attempts (
    request_id bigint NOT NULL,
    n          integer NOT NULL,
    at         double precision NOT NULL,
    outcome    text NOT NULL,
    status     integer,
    error      text,
    route      text
);
CREATE INDEX attempts_request ON attempts (request_id);

-- keys compare bytewise so export pages (keyset on key) walk the primary key in SQLite's order
CREATE TABLE records (
    job_id         bigint NOT NULL,
    key            text COLLATE "C" NOT NULL,
    data           jsonb NOT NULL,
    url            text NOT NULL,
    fetched_at     double precision NOT NULL,
    warc_file      text,
    warc_record_id text,
    updated_at     double precision NOT NULL,
    PRIMARY KEY (job_id, key)
);

CREATE TABLE quarantine (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id         bigint NOT NULL,
    url            text NOT NULL,
    data           jsonb,
    errors         jsonb NOT NULL,
    fetched_at     double precision NOT NULL,
    warc_file      text,
    warc_record_id text
);
CREATE INDEX quarantine_job ON quarantine (job_id, id);

-- content dedup: the first request whose body had this hash (later ones point at it)
CREATE TABLE content (
    job_id     bigint NOT NULL,
    hash       bytea NOT NULL,
    request_id bigint NOT NULL,
    PRIMARY KEY (job_id, hash)
);

-- name: migration_0002_workers
-- Workers seen leasing lately share a domain's in-flight slots: without this the first worker to
-- lease a busy domain keeps every slot and the others idle. requests_owner finds a worker's own
-- live leases per domain.
CREATE TABLE workers (
    id         text PRIMARY KEY,
    started_at double precision NOT NULL,
    last_seen  double precision NOT NULL
);
CREATE INDEX requests_owner ON requests (lease_owner, domain) WHERE state = 'leased';

-- name: migration_0003_pacing
-- Adaptive pacing held per domain (policy.pacing.PacingState, applied by complete and fail), the
-- robots.txt Crawl-delay floor, and trap budget counters. concurrency is the current cap on
-- in-flight requests (max_in_flight is the configured one); the lease reads it.
ALTER TABLE domains
    ADD COLUMN concurrency   integer NOT NULL DEFAULT 0,
    ADD COLUMN delay_floor   double precision NOT NULL DEFAULT 0,
    ADD COLUMN ewma_latency  double precision,
    ADD COLUMN errors_in_row integer NOT NULL DEFAULT 0,
    ADD COLUMN ok_in_row     integer NOT NULL DEFAULT 0,
    ADD COLUMN slowed_at     double precision NOT NULL DEFAULT 0,
    ADD COLUMN limit_delay   double precision NOT NULL DEFAULT 0,
    ADD COLUMN ok_rate       double precision NOT NULL DEFAULT 0,
    ADD COLUMN rate_at       double precision NOT NULL DEFAULT 0,
    ADD COLUMN trips         integer NOT NULL DEFAULT 0;
UPDATE domains SET concurrency = max_in_flight;
-- requests a job admitted per host ('host', domain) and per URL pattern ('pattern', pattern):
-- the page budgets are counted here, at enqueue, so they hold across every worker
CREATE TABLE budgets (
    job_id bigint NOT NULL,
    kind   text NOT NULL,
    key    text COLLATE "C" NOT NULL,
    used   integer NOT NULL,
    PRIMARY KEY (job_id, kind, key)
);

-- name: migration_0004_content
-- A page whose body was seen before under another URL is still parsed (its links and records
-- depend on its URL) and archived as a WARC revisit record; the request notes the first request
-- with that content, and records carry the WARC record that holds the payload.
ALTER TABLE requests ADD COLUMN duplicate_of bigint;
ALTER TABLE records
    ADD COLUMN warc_refers_to_file text,
    ADD COLUMN warc_refers_to text;
ALTER TABLE quarantine
    ADD COLUMN warc_refers_to_file text,
    ADD COLUMN warc_refers_to text;

-- name: migration_0005_pacing_document
-- A lane's pacing state (policy.pacing.PacingState) is one JSON document, but for the columns the
-- lease reads (delay, concurrency, blocked_until, delay_floor): the policy can then change what it
-- remembers without a migration. The older columns stay, unused.
ALTER TABLE domains ADD COLUMN pacing text NOT NULL DEFAULT '{}';
UPDATE domains SET pacing = json_build_object(
    'ewma_latency', ewma_latency, 'errors_in_row', errors_in_row, 'ok_in_row', ok_in_row,
    'slowed_at', slowed_at, 'limit_delay', limit_delay, 'ok_rate', ok_rate, 'rate_at', rate_at,
    'trips', trips)::text;

-- name: migration_0008_lanes
-- The unit of pacing is a lane, a (domain, route) pair. A lane keeps the adaptive pacing (delay,
-- concurrency, hold, the controller's document), its in-flight count and next start, and its
-- route's own limits (a cap of 2^30: none); the domain keeps what caps the sum over its lanes
-- (domain_concurrency, domain_rate, the robots.txt Crawl-delay floor), its total in flight, its
-- next start and the route tier it is crawled on. Routes keep their circuit breaker. A leased
-- request remembers the route its lease goes through. Every domain so far gets one lane,
-- "direct", with the pacing it had.
CREATE TABLE lanes (
    domain        text COLLATE "C" NOT NULL,
    route         text COLLATE "C" NOT NULL,
    tier          integer NOT NULL DEFAULT 0,
    max_in_flight integer NOT NULL,
    min_delay     double precision NOT NULL DEFAULT 0,
    delay_floor   double precision NOT NULL DEFAULT 0,
    delay         double precision NOT NULL DEFAULT 0,
    concurrency   integer NOT NULL,
    blocked_until double precision NOT NULL DEFAULT 0,
    pacing        text NOT NULL DEFAULT '{}',
    health        text NOT NULL DEFAULT '{}',
    in_flight     integer NOT NULL DEFAULT 0,
    next_at       double precision NOT NULL DEFAULT 0,
    last_lease_at double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (domain, route)
);
CREATE TABLE routes (
    id         text COLLATE "C" PRIMARY KEY,
    pool       text NOT NULL,
    tier       integer NOT NULL DEFAULT 0,
    cost       double precision NOT NULL DEFAULT 0,
    breaker    text NOT NULL DEFAULT '{}',
    open_until double precision NOT NULL DEFAULT 0
);
INSERT INTO routes (id, pool) VALUES ('direct', 'direct');
ALTER TABLE domains
    ADD COLUMN tier integer NOT NULL DEFAULT 0,
    ADD COLUMN escalation text NOT NULL DEFAULT '{}';
ALTER TABLE requests ADD COLUMN lease_route text;
INSERT INTO lanes (domain, route, max_in_flight, min_delay, delay_floor, delay, concurrency,
                   blocked_until, pacing, in_flight, next_at, last_lease_at)
SELECT domain, 'direct', 1073741824, 0, delay_floor, delay, concurrency, blocked_until, pacing,
       in_flight, next_at, last_lease_at
FROM domains;
UPDATE requests SET lease_route = 'direct' WHERE state = 'leased';
-- every change of a domain's route tier (up after blocks, or a probe down), for status and metrics
CREATE TABLE tier_moves (
    domain    text NOT NULL,
    at        double precision NOT NULL,
    from_tier integer NOT NULL,
    to_tier   integer NOT NULL,
    why       text NOT NULL
);

-- name: migration_0009_sessions
-- Sessions (identities: cookies, user agent, headers, route) held in the store, per job and key
-- (a sticky route's id, a rotating pool's name, or "direct"), so every worker continues them.
-- Retired ones are deleted.
CREATE TABLE sessions (
    job_id     bigint NOT NULL,
    key        text NOT NULL,
    id         text NOT NULL,
    data       text NOT NULL,
    updated_at double precision NOT NULL,
    PRIMARY KEY (job_id, key, id)
);

-- name: load_sessions
SELECT data FROM sessions WHERE job_id = $1 AND key = $2;

-- name: save_sessions
INSERT INTO sessions (job_id, key, id, data, updated_at)
SELECT $1, u.key, u.id, u.data, $5
FROM unnest($2::text[], $3::text[], $4::text[]) AS u(key, id, data)
ON CONFLICT (job_id, key, id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at;

-- name: drop_sessions
DELETE FROM sessions s USING unnest($2::text[], $3::text[]) AS u(key, id)
WHERE s.job_id = $1 AND s.key = u.key AND s.id = u.id;

-- name: migration_0010_page_types
-- Which fetcher a page type (a domain's URL pattern) needs, learnt by "auto" spiders (the
-- browser where HTTP gives nothing the spider can use), remembered fleet-wide and across crawls.
-- Kept by job name: what a job learnt about a site outlives a fresh start of the job.
CREATE TABLE page_types (
    job        text NOT NULL,
    domain     text NOT NULL,
    pattern    text NOT NULL,
    fetcher    text NOT NULL,
    decided_at double precision NOT NULL,
    PRIMARY KEY (job, domain, pattern)
);

-- name: page_types
SELECT domain, pattern, fetcher FROM page_types WHERE job = $1;

-- name: set_page_types
INSERT INTO page_types (job, domain, pattern, fetcher, decided_at)
SELECT j.name, u.domain, u.pattern, u.fetcher, $1
FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[]) AS u(job_id, domain, pattern, fetcher)
JOIN jobs j ON j.id = u.job_id
ON CONFLICT (job, domain, pattern) DO UPDATE SET
    fetcher = excluded.fetcher, decided_at = excluded.decided_at;

-- name: capacity_domains
-- what the capacity planner needs of a job's domains: work left, limits, current tier
SELECT r.domain, count(*) FILTER (WHERE r.state = 'queued')::int, d.max_in_flight, d.min_delay,
       d.delay_floor, d.tier
FROM requests r JOIN domains d ON d.domain = r.domain
WHERE r.job_id = $1
GROUP BY r.domain, d.max_in_flight, d.min_delay, d.delay_floor, d.tier;

-- name: capacity_lanes
-- and of their lanes for their own requests (not those only pinned requests use): the route's
-- pool, the lane's health, the route's breaker
SELECT l.domain, l.route, coalesce(rt.pool, l.route), l.tier, l.health, coalesce(rt.breaker, '{}')
FROM lanes l LEFT JOIN routes rt ON rt.id = l.route
WHERE l.domain = ANY ($1::text[]) AND l.shared = 1;

-- name: notify
-- Idle workers LISTEN instead of polling: a transaction that queued requests, freed slots or
-- changed what may be leased wakes them when it commits (notifications of one transaction with
-- the same payload are folded into one).
SELECT pg_notify($1, '');

-- name: advisory_lock
-- Serialises upgrade() across every process starting at once (a fleet boots together); the lock
-- is per schema and ends with the transaction, so a crashed upgrader cannot leave it held.
SELECT pg_advisory_xact_lock(hashtext('crawlfleet.upgrade'), hashtext($1::text));

-- name: applied_versions
SELECT version FROM crawlfleet_meta ORDER BY version;

-- name: record_version
INSERT INTO crawlfleet_meta (version, name, applied_at) VALUES ($1, $2, $3);

-- name: schema_version
SELECT coalesce(max(version), 0) FROM crawlfleet_meta;

-- name: submit_job
INSERT INTO jobs (name, spider, settings, max_attempts, created_at)
VALUES ($1, $2, $3::jsonb, $4, $5)
ON CONFLICT (name) DO UPDATE SET
    spider = excluded.spider, settings = excluded.settings, max_attempts = excluded.max_attempts;

-- name: ensure_first_run
-- a new job's first run (a job there already keeps its runs)
INSERT INTO runs (job_id, run, kind, state, started_at)
SELECT id, 1, 'first', 'running', $2 FROM jobs WHERE name = $1 AND run = 1
ON CONFLICT DO NOTHING;

-- name: get_job
SELECT id, name, spider, state, settings::text, created_at, max_attempts FROM jobs WHERE name = $1;

-- name: list_jobs
SELECT id, name, spider, state, settings::text, created_at, max_attempts FROM jobs ORDER BY id;

-- name: set_job_state
UPDATE jobs SET state = $1 WHERE name = $2;

-- name: insert_requests
-- One statement per batch. The rows come as one JSON array of arrays ($3, postgres._json_rows):
-- the server takes them apart, where binding 13 arrays cost the client ~20 type checks a row.
-- The caller sorts the batch by fingerprint: concurrent producers then meet on the unique index in
-- the same order and wait for each other instead of deadlocking. DO NOTHING also absorbs
-- duplicates inside the batch. For a job with page budgets the store adds RETURNING id, url,
-- domain (INSERT_RETURNING): the rows actually inserted (a duplicate draws on no budget).
INSERT INTO requests
    (job_id, fingerprint, url, domain, priority, depth, callback, meta, method, body, fetcher,
     max_attempts, headers, pool, found_by, lastmod, listed, first_run, state, ready_at,
     created_at)
SELECT $1, decode(r->>0, 'hex'), r->>1, r->>2, (r->>3)::int, (r->>4)::int, r->>5,
       (r->>6)::jsonb, r->>7, decode(r->>8, 'hex'), r->>9, (r->>10)::int, r->>11, r->>12,
       (r->>13)::bigint, (r->>14)::float8, (r->>15)::int, (SELECT run FROM jobs WHERE id = $1),
       'queued', $2, $2
FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS u(r, n)
ORDER BY u.n
ON CONFLICT (job_id, fingerprint) DO NOTHING;

-- name: insert_traps
-- links their finder judged traps: dead rows (counted, listed, replayable), never fetched, each
-- with its one history entry ($3 as in insert_requests, a row's 17th value its error)
WITH inserted AS (
    INSERT INTO requests
        (job_id, fingerprint, url, domain, priority, depth, callback, meta, method, body, fetcher,
         max_attempts, headers, pool, found_by, lastmod, listed, first_run, state, dead_reason,
         last_error, ready_at, created_at, finished_at)
    SELECT $1, decode(r->>0, 'hex'), r->>1, r->>2, (r->>3)::int, (r->>4)::int, r->>5,
           (r->>6)::jsonb, r->>7, decode(r->>8, 'hex'), r->>9, (r->>10)::int, r->>11, r->>12,
           (r->>13)::bigint, (r->>14)::float8, (r->>15)::int,
           (SELECT run FROM jobs WHERE id = $1), 'dead', 'trap', r->>16, $2, $2, $2
    FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS u(r, n)
    ORDER BY u.n
    ON CONFLICT (job_id, fingerprint) DO NOTHING
    RETURNING id, last_error
)
INSERT INTO attempts (request_id, n, at, outcome, status, error, route)
SELECT id, 0, $2, 'trap', NULL, last_error, NULL FROM inserted;

-- name: lock_budgets
-- The budget counters of a batch, created at 0 if new and locked (DO UPDATE locks the row) in
-- (kind, key) order, the same in every transaction: concurrent enqueuers of one host wait for
-- each other instead of both spending its last pages.
INSERT INTO budgets (job_id, kind, key, used)
SELECT $1, u.kind, u.key, 0 FROM unnest($2::text[], $3::text[]) AS u(kind, key)
ORDER BY u.kind, u.key
ON CONFLICT (job_id, kind, key) DO UPDATE SET used = budgets.used
RETURNING kind, key, used;

-- name: set_budgets
UPDATE budgets b SET used = u.used
FROM unnest($2::text[], $3::text[], $4::int[]) AS u(kind, key, used)
WHERE b.job_id = $1 AND b.kind = u.kind AND b.key = u.key;

-- name: add_trap_dropped
-- traps past their rule's sample: counted per domain, rule and URL pattern, no row (keys sorted
-- by the caller, so concurrent enqueuers lock them in one order)
INSERT INTO budgets (job_id, kind, key, used)
SELECT $1, 'trap_dropped', u.key, u.n FROM unnest($2::text[], $3::int[]) AS u(key, n)
ORDER BY u.key
ON CONFLICT (job_id, kind, key) DO UPDATE SET used = budgets.used + excluded.used;

-- name: drop_trapped
-- new requests over their budget past their rule's sample: no rows (their counts are kept)
DELETE FROM requests WHERE id = ANY ($1::bigint[]);

-- name: trap_requests
-- new requests over their budget: dead(trap) with their one history entry
WITH trapped AS (
    UPDATE requests r SET state = 'dead', dead_reason = 'trap', last_error = u.error,
        finished_at = $1
    FROM unnest($2::bigint[], $3::text[]) AS u(id, error)
    WHERE r.id = u.id
    RETURNING r.id, r.last_error
)
INSERT INTO attempts (request_id, n, at, outcome, status, error, route)
SELECT id, 0, $1, 'trap', NULL, last_error, NULL FROM trapped;

-- name: jobs_of
SELECT id, job_id FROM requests WHERE id = ANY ($1::bigint[]);

-- name: insert_domains
-- first writer wins; set_domain_limits changes an existing domain. Sorted by the caller.
INSERT INTO domains (domain, max_in_flight, min_delay, delay, concurrency)
SELECT u.domain, u.max_in_flight, u.min_delay, u.min_delay, u.max_in_flight
FROM unnest($1::text[], $2::int[], $3::float8[]) AS u(domain, max_in_flight, min_delay)
ON CONFLICT (domain) DO NOTHING;

-- name: insert_lanes
-- new domains' lanes, one per route, with the route's own limits (first writer wins; sorted),
-- shared (the domain's own requests use it) and/or pinned (requests pinned to its pool do)
INSERT INTO lanes (domain, route, tier, max_in_flight, min_delay, delay, concurrency, shared,
                   pinned)
SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::float8[], $6::float8[],
                     $7::int[], $8::int[], $9::int[])
ON CONFLICT (domain, route) DO NOTHING;

-- name: lane_roles
-- after insert_lanes: a lane there already gains the roles it lacked (only those rows are
-- written, and so locked)
UPDATE lanes l SET shared = greatest(l.shared, u.shared), pinned = greatest(l.pinned, u.pinned)
FROM unnest($1::text[], $2::text[], $3::int[], $4::int[]) AS u(domain, route, shared, pinned)
WHERE l.domain = u.domain AND l.route = u.route AND (u.shared > l.shared OR u.pinned > l.pinned);

-- name: upsert_routes
INSERT INTO routes (id, pool, tier, cost)
SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::float8[])
ON CONFLICT (id) DO UPDATE SET pool = excluded.pool, tier = excluded.tier, cost = excluded.cost

-- name: upsert_domain
-- A raised limit is granted at once; a lowered one clamps the adaptive concurrency; an unchanged
-- one (a job submitted again) keeps what pacing learned. Returns the cap it had (or none).
WITH before AS (SELECT max_in_flight FROM domains WHERE domain = $1 FOR UPDATE)
INSERT INTO domains (domain, max_in_flight, min_delay, delay, concurrency)
VALUES ($1, $2, $3, $3, $2)
ON CONFLICT (domain) DO UPDATE SET
    concurrency = CASE WHEN excluded.max_in_flight > domains.max_in_flight
                       THEN excluded.max_in_flight
                       ELSE least(domains.concurrency, excluded.max_in_flight) END,
    max_in_flight = excluded.max_in_flight,
    min_delay = excluded.min_delay,
    delay = greatest(domains.delay, excluded.min_delay, domains.delay_floor)
RETURNING (SELECT max_in_flight FROM before);

-- name: limit_lanes
-- the domain's new limits reach its lanes: a lowered cap clamps the adaptive concurrency, a
-- raised one widens a narrower lane to where a new lane starts (the controller grows it from
-- there), the rate floor moves with the domain's
UPDATE lanes SET
    concurrency = CASE WHEN $3 THEN greatest(concurrency, least(max_in_flight, $2, $5))
                       ELSE least(concurrency, $2) END,
    delay = greatest(delay, min_delay, $4, delay_floor)
WHERE domain = $1

-- name: set_crawl_delay
-- the floor holds for the domain as a whole (the lease spaces starts over all its lanes by it)
-- and for each lane (domain row first: the lock order of this file)
WITH d AS (
    UPDATE domains SET delay_floor = $2, delay = greatest(delay, $2) WHERE domain = $1
    RETURNING domain
)
UPDATE lanes l SET delay_floor = $2, delay = greatest(l.delay, $2)
FROM d WHERE l.domain = d.domain

-- name: pace_read
-- The lanes of a complete/fail batch, locked in (domain, route) order (the lock order of this
-- file), to fold the batch's outcomes into their pacing in Python (frontier.pacing, one pure
-- function for every backend) and write them back with pace_write in the same transaction. A
-- lane's limits are the narrower of its route's and its domain's.
SELECT l.domain, l.route, least(l.max_in_flight, d.max_in_flight),
       greatest(l.min_delay, d.min_delay), l.in_flight, l.next_at, l.delay, l.concurrency,
       l.blocked_until, l.delay_floor, l.pacing, l.health, l.tier, l.shared
FROM lanes l JOIN domains d ON d.domain = l.domain
JOIN unnest($1::text[], $2::text[]) AS u(domain, route) ON l.domain = u.domain AND l.route = u.route
ORDER BY l.domain, l.route
FOR UPDATE OF l

-- name: lane_state
SELECT l.domain, l.route, least(l.max_in_flight, d.max_in_flight),
       greatest(l.min_delay, d.min_delay), l.in_flight, l.next_at, l.delay, l.concurrency,
       l.blocked_until, l.delay_floor, l.pacing
FROM lanes l JOIN domains d ON d.domain = l.domain
WHERE l.domain = $1
ORDER BY l.route <> 'direct', l.route

-- name: lock_domains
-- a complete/fail batch's domains, locked in domain order before their lanes (the lock order)
SELECT domain FROM domains WHERE domain = ANY ($1::text[]) ORDER BY domain FOR UPDATE;

-- name: domains_freed
UPDATE domains d SET in_flight = greatest(0, d.in_flight - u.n)
FROM unnest($1::text[], $2::int[]) AS u(domain, n)
WHERE d.domain = u.domain;

-- name: pace_write
UPDATE lanes l SET
    in_flight = greatest(0, l.in_flight - u.freed), delay = u.delay,
    concurrency = u.concurrency, blocked_until = u.blocked_until, pacing = u.pacing,
    health = u.health
FROM unnest($1::text[], $2::text[], $3::int[], $4::float8[], $5::int[], $6::float8[],
            $7::text[], $8::text[])
     AS u(domain, route, freed, delay, concurrency, blocked_until, pacing, health)
WHERE l.domain = u.domain AND l.route = u.route;

-- name: routes_read
-- after the lanes (the lock order), in id order
SELECT id, breaker FROM routes WHERE id = ANY ($1::text[]) ORDER BY id FOR UPDATE;

-- name: routes_write
UPDATE routes r SET breaker = u.breaker, open_until = u.open_until
FROM unnest($1::text[], $2::text[], $3::float8[]) AS u(id, breaker, open_until)
WHERE r.id = u.id;

-- name: domain_tiers
-- the route tiers a batch's domains have lanes on for their own requests, and the tier each is
-- crawled on now (the domain rows are locked already, by lock_domains)
SELECT l.domain, d.tier, d.escalation, array_agg(DISTINCT l.tier)
FROM lanes l JOIN domains d ON d.domain = l.domain
WHERE l.domain = ANY ($1::text[]) AND l.shared = 1
GROUP BY l.domain, d.tier, d.escalation;

-- name: escalate
UPDATE domains SET tier = $2, escalation = $3 WHERE domain = $1;

-- name: tier_moved
INSERT INTO tier_moves (domain, at, from_tier, to_tier, why) VALUES ($1, $2, $3, $4, $5);

-- name: domain_tier_init
-- new domains are crawled on the lowest route tier they have a lane on for their own requests
-- (not one only pinned requests use)
UPDATE domains d SET tier = t.tier
FROM (SELECT domain, min(tier) AS tier FROM lanes
      WHERE domain = ANY ($1::text[]) AND shared = 1
      GROUP BY domain) t
WHERE d.domain = t.domain
  AND NOT EXISTS (SELECT FROM lanes l
                  WHERE l.domain = d.domain AND l.tier = d.tier AND l.shared = 1);

-- name: table_health
-- The store's tables ($1) in this schema with the counters frontier.upkeep decides on: live and
-- dead rows, rows changed since their last ANALYZE, the planner's row estimate (-1: never
-- analyzed), and whether autovacuum runs for the table (the server's setting and the table's)
SELECT c.relname, s.n_live_tup, s.n_dead_tup, s.n_mod_since_analyze, c.reltuples,
       current_setting('autovacuum')::bool
       AND NOT EXISTS (SELECT FROM unnest(c.reloptions) o
                       WHERE lower(o) IN ('autovacuum_enabled=false', 'autovacuum_enabled=off',
                                          'autovacuum_enabled=0', 'autovacuum_enabled=no'))
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = current_schema() AND c.relname = ANY ($1::text[])
ORDER BY c.relname;

-- name: rescue_expired
-- An expired lease counted its attempt when it was taken: back to the queue, or dead when that
-- was the last one (a URL that kills its worker every time must not loop forever).
-- SKIP LOCKED: every leaser runs this first; two of them rescuing at once split the expired rows
-- instead of queueing behind each other, and a row a holder is completing right now is left to it.
WITH expired AS (
    SELECT id FROM requests
    WHERE state = 'leased' AND lease_expires_at < $1
    ORDER BY id
    FOR UPDATE SKIP LOCKED
), rescued AS (
    UPDATE requests r SET
        state = CASE WHEN r.attempts >= r.max_attempts THEN 'dead' ELSE 'queued' END,
        dead_reason = CASE WHEN r.attempts >= r.max_attempts THEN 'worker_lost'
                           ELSE r.dead_reason END,
        last_error = 'lease expired (worker lost)',
        finished_at = CASE WHEN r.attempts >= r.max_attempts THEN $1::float8 END,
        ready_at = $1,
        lease_owner = NULL
    FROM expired e
    WHERE r.id = e.id
    RETURNING r.id, r.domain, r.attempts, r.lease_route
), history AS (
    INSERT INTO attempts (request_id, n, at, outcome, status, error, route)
    SELECT id, attempts, $1::float8, 'lease_expired', NULL, 'lease expired', lease_route
    FROM rescued
)
SELECT domain, coalesce(lease_route, 'direct'), count(*)::int FROM rescued
GROUP BY domain, lease_route;

-- name: worker_seen
INSERT INTO workers (id, started_at, last_seen) VALUES ($1, $2, $2)
ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen;

-- name: active_workers
SELECT count(*)::int FROM workers WHERE last_seen >= $1;

-- name: my_leases
SELECT domain, coalesce(lease_route, 'direct'), count(*)::int FROM requests
WHERE lease_owner = $1 AND state = 'leased'
GROUP BY domain, lease_route

-- name: lease
-- The whole lease in one statement, read lazily from the top: the LIMIT in pick stops the walk as
-- soon as the batch is full, so a lease touches only the domains, lanes and rows it hands out (a
-- plan that sorts or hashes every queued row, as an EXISTS semi-join would, costs milliseconds).
--
-- dom: domains with a free in-flight slot, a start slot within the horizon and a request ready,
--   oldest-served first (a domain with a million URLs cannot starve ten small ones), not visited yet ($8).
--   FOR UPDATE SKIP LOCKED on the domain row is what makes politeness hold across the fleet:
--   while one leaser hands out a domain's slots, another skips that domain (it does not wait,
--   and it cannot hand out the same slots) and serves the next one.
-- cand: per domain, its oldest-served lane that may lease now: on the domain's current route
--   tier (or, whatever its tier, one that requests pinned to its pool were queued for, while
--   the domain has pinned requests queued: pinned; shared says whether it carries the domain's
--   own requests too, tag is the pool column of a request pinned to its pool), a free slot
--   below its (adaptive) concurrency, not held, its route's breaker not open, a start slot
--   within the horizon, and this worker below its fair share of it ($9 workers share each
--   lane's slots; $10/$11/$12: this worker's live leases per lane). One lane per
--   domain per statement: the domain's cap is checked against one lane's take; the caller runs
--   the statement again for the domain's other lanes. A lane's starts are spaced by the wider of
--   its own delay and its domain's (rate, Crawl-delay); free is the narrower of the lane's, the
--   domain's and the share's room.
-- pick: per lane, its domain's best ready requests (priority, then age) of the running jobs and
--   of the fetcher kinds this worker runs ($13; "auto" starts as http), as many as it has free
--   slots (and start slots inside the horizon), FOR UPDATE SKIP LOCKED so concurrent leasers
--   never share a row. A request that failed through the lane's route (a block, a refusal, a
--   429: lease_route keeps the route of its last lease) waits for another of the domain's lanes,
--   unless it has no other that may carry it now (alone; pool_alone for a pinned request). A
--   request pinned to pools (its pool column) goes only on lanes of their routes. slot numbers
--   the lane's requests: it starts at start + slot * gap. A domain without ready work (or
--   without a lane that may lease) yields one row with a NULL id: it is still marked served,
--   so it moves to the back of the line; the caller runs the statement again past the domains
--   visited ($8) while they leave the batch short.
-- taken: the fencing token moves on at every lease; the lease remembers its route.
-- lanes_served / domains_served: in-flight counts and next start slots, on the rows locked above.
WITH active AS (
    SELECT coalesce(array_agg(id), '{}') AS ids FROM jobs
    WHERE state = 'running' AND ($7::text[] IS NULL OR name = ANY ($7::text[]))
), mine AS (
    SELECT m.domain, m.route, m.n FROM unnest($10::text[], $11::text[], $12::int[])
        AS m (domain, route, n)
), dom AS MATERIALIZED (
    SELECT d.domain, d.max_in_flight - d.in_flight AS d_free,
           greatest(d.min_delay, d.delay_floor) AS step, d.next_at AS d_next, d.tier,
           d.last_lease_at
    FROM domains d
    WHERE d.in_flight < d.max_in_flight AND d.next_at <= $2 AND d.domain <> ALL ($8::text[])
      -- only domains with a request ready now: on a broad crawl most domains are done or wait
      -- for a retry, and each one visited empty took one of the statement's $3 places (and
      -- the caller's 256) and went to the back of the line as if served, so a domain with work
      -- waited behind every empty one (20-110 s on 1,500 hosts); one probe of requests_ready
      -- per domain walked, as the walk is lazy (LIMIT). A scalar subquery, not EXISTS: the
      -- planner turns an EXISTS into a semi-join, and on statistics that lag the crawl (a
      -- table of seeds analyzed, thousands of links since) into a hash of every ready
      -- request, a join with every domain and a sort (30 ms a lease on 2,000 hosts); a
      -- subquery with a LIMIT stays one probe of requests_ready per domain walked.
      AND (SELECT true FROM requests q
           WHERE q.domain = d.domain AND q.state = 'queued' AND q.ready_at <= $1 LIMIT 1)
    ORDER BY d.last_lease_at, d.domain
    -- each domain walked gives pick at least one row (a lease, or a NULL row found empty),
    -- and pick stops at $4: a domain past the $4th would be locked and its lanes looked at
    -- for nothing, and (when it was marked served) sent to the back of the line unserved
    LIMIT least($3::bigint, $4::bigint)
    FOR UPDATE OF d SKIP LOCKED
), cand AS MATERIALIZED (
    SELECT x.domain, x.last_lease_at, x.step, l.route, l.delay,
           greatest(l.delay, x.step) AS gap,
           greatest(l.next_at, x.d_next, $1) AS start,
           least(l.concurrency - l.in_flight, x.d_free, l.share) AS free,
           (SELECT count(*) <= 1 FROM lanes o LEFT JOIN routes ro ON ro.id = o.route
            WHERE o.domain = x.domain AND o.tier = x.tier AND o.shared = 1
              AND coalesce(ro.open_until, 0) <= $1) AS alone,
           l.shared, ',' || l.pool || ',' AS tag,
           l.pinned = 0 OR (SELECT count(*) <= 1 FROM lanes o JOIN routes ro ON ro.id = o.route
                            WHERE o.domain = x.domain AND ro.pool = l.pool
                              AND ro.open_until <= $1) AS pool_alone,
           EXISTS (SELECT FROM requests q
                   WHERE q.domain = x.domain AND q.state = 'queued' AND q.pool IS NOT NULL
                     AND q.ready_at <= $1) AS pins
    FROM dom x
    LEFT JOIN LATERAL (
        SELECT ln.route, ln.delay, ln.next_at, ln.concurrency, ln.in_flight,
               (ln.concurrency + $9 - 1) / $9 - coalesce(m.n, 0) AS share,
               ln.shared = 1 AND ln.tier = x.tier AS shared, ln.pinned,
               coalesce(r.pool, ln.route) AS pool
        FROM lanes ln
        LEFT JOIN routes r ON r.id = ln.route
        LEFT JOIN mine m ON m.domain = ln.domain AND m.route = ln.route
        WHERE ln.domain = x.domain
          AND ((ln.tier = x.tier AND ln.shared = 1)
               OR (ln.pinned = 1 AND EXISTS (SELECT FROM requests q
                                             WHERE q.domain = x.domain AND q.state = 'queued'
                                               AND q.pool IS NOT NULL)))
          AND ln.in_flight < ln.concurrency
          AND ln.blocked_until <= $1 AND ln.next_at <= $2 AND coalesce(r.open_until, 0) <= $1
          AND (ln.concurrency + $9 - 1) / $9 > coalesce(m.n, 0)
        ORDER BY ln.last_lease_at, ln.route
        LIMIT 1
        FOR UPDATE OF ln SKIP LOCKED
    ) l ON true
), pick AS MATERIALIZED (
    SELECT p.id, c.domain, c.route, c.delay, c.step, c.gap, c.start, c.last_lease_at, p.slot,
           c.start + p.slot * c.gap AS start_at,
           c.route IS NULL OR (c.shared AND NOT c.pins) AS settled
    FROM cand c
    LEFT JOIN LATERAL (
        SELECT q.id, (row_number() OVER (ORDER BY q.priority DESC, q.id) - 1)::int AS slot
        FROM (
            SELECT r.id, r.priority FROM requests r
            WHERE c.route IS NOT NULL
              AND r.domain = c.domain AND r.state = 'queued' AND r.ready_at <= $1
              AND r.job_id = ANY ((SELECT ids FROM active)::bigint[])
              AND (CASE WHEN r.fetcher IN ('browser', 'impersonate') THEN r.fetcher ELSE 'http' END)
                  = ANY ($13::text[])
              AND (CASE WHEN r.pool IS NULL THEN c.shared ELSE strpos(r.pool, c.tag) > 0 END)
              AND ((CASE WHEN r.pool IS NULL THEN c.alone ELSE c.pool_alone END)
                   OR r.lease_route IS NULL OR r.lease_route <> c.route)
            ORDER BY r.priority DESC, r.id
            LIMIT least(c.free, CASE WHEN c.gap > 0
                                     THEN floor(($2 - c.start) / c.gap)::int + 1
                                     ELSE c.free END)
            FOR UPDATE SKIP LOCKED
        ) q
    ) p ON true
    LIMIT $4
), taken AS (
    UPDATE requests r SET
        state = 'leased',
        attempts = r.attempts + 1,
        lease_token = r.lease_token + 1,
        lease_owner = $5,
        lease_expires_at = p.start_at + $6,
        lease_route = p.route
    FROM pick p
    WHERE r.id = p.id
    RETURNING r.id, r.job_id, r.url, r.domain, r.priority, r.depth, r.callback, r.meta::text,
              r.method, r.body, r.fetcher, r.attempts, r.max_attempts, r.lease_token, r.headers,
              r.page, r.lease_expires_at, p.start_at, p.last_lease_at, p.slot, p.route
), served AS (
    SELECT domain, route, start, delay, step, gap, count(id)::int AS n
    FROM pick GROUP BY domain, route, start, delay, step, gap
), lanes_served AS (
    UPDATE lanes l SET
        in_flight = l.in_flight + s.n,
        next_at = CASE WHEN s.n > 0 THEN s.start + (s.n - 1) * s.gap + s.delay ELSE l.next_at END,
        last_lease_at = $1
    FROM served s
    WHERE l.domain = s.domain AND l.route = s.route
), domains_served AS (
    UPDATE domains d SET
        in_flight = d.in_flight + s.n,
        -- a domain's own spacing (rate, Crawl-delay) moves its next start; without one
        -- (step 0) its lanes are spaced by their own delays alone: the last slot of one lane
        -- must not become the first of the next (each lane led the others' starts past the
        -- horizon, and eight routes ran at half their pace)
        next_at = CASE WHEN s.n > 0 AND s.step > 0
                       THEN greatest(d.next_at, s.start + (s.n - 1) * s.gap + s.step)
                       ELSE d.next_at END,
        last_lease_at = $1
    FROM (SELECT s.domain, sum(s.n)::int AS n, max(s.start) AS start,
                 max(s.gap) AS gap, max(s.step) AS step
          FROM served s GROUP BY s.domain) s
    WHERE d.domain = s.domain
)
-- one row per pick row: the leases, and a row with a NULL id per domain found without ready work
-- (the caller leases again, past the domains already visited, when those left the batch short;
-- settled false: the lane found empty was one only pinned requests use, or the domain has
-- pinned requests ready that another of its lanes may take: the caller looks again)
SELECT t.id, j.name, t.url, p.domain, t.priority, t.depth, t.callback, t.meta, t.method, t.body,
       t.fetcher, t.attempts, t.max_attempts, t.lease_token, t.headers, t.page,
       t.lease_expires_at, p.start_at,
       p.route, p.settled
FROM pick p
LEFT JOIN taken t ON t.id = p.id
LEFT JOIN jobs j ON j.id = t.job_id
ORDER BY p.last_lease_at, p.domain, p.slot

-- name: release_lanes
-- Give back in-flight slots of lanes and of their domains. The rows are locked in the lock
-- order of this file (domains in domain order, then lanes in (domain, route) order): two
-- transactions freeing slots of the same domains in different orders would otherwise deadlock.
WITH freed AS (
    SELECT u.domain, u.route, u.n FROM unnest($1::text[], $2::text[], $3::int[])
        AS u(domain, route, n)
), per_domain AS (
    SELECT domain, sum(n)::int AS n FROM freed GROUP BY domain
), locked AS (
    SELECT d.domain FROM domains d
    WHERE d.domain IN (SELECT domain FROM per_domain)
    ORDER BY d.domain
    FOR UPDATE
), domains_freed AS (
    UPDATE domains d SET in_flight = greatest(0, d.in_flight - f.n)
    FROM per_domain f, locked l
    WHERE d.domain = f.domain AND l.domain = f.domain
    RETURNING d.domain
)
UPDATE lanes l SET in_flight = greatest(0, l.in_flight - f.n)
FROM freed f
WHERE l.domain = f.domain AND l.route = f.route AND EXISTS (SELECT FROM domains_freed)

-- name: heartbeat
UPDATE requests r SET lease_expires_at = greatest(r.lease_expires_at, $1)
FROM unnest($2::bigint[], $3::bigint[]) AS u(id, token)
WHERE r.id = u.id AND r.lease_token = u.token AND r.state = 'leased'
RETURNING r.id;

-- name: complete
-- run: the run that finished it; page: its recrawl state (validators, body hash, revisit
-- interval, last capture: the JSON the lease hands back); visit: what this fetch found
UPDATE requests r SET state = 'done', status = u.status, finished_at = $1, lease_owner = NULL,
    run = (SELECT run FROM jobs j WHERE j.id = r.job_id), page = coalesce(u.page, r.page),
    due_at = u.due_at, nbytes = u.nbytes, visit = u.visit
FROM unnest($2::bigint[], $3::bigint[], $4::int[], $5::text[], $6::float8[], $7::bigint[],
            $8::text[])
     AS u(id, token, status, page, due_at, nbytes, visit)
WHERE r.id = u.id AND r.lease_token = u.token AND r.state = 'leased'
RETURNING r.id, r.job_id, r.domain, coalesce(r.lease_route, 'direct');

-- name: fail
-- No retry_at: dead with its reason. The attempt goes to the history in the same statement.
-- counted = false (robots.txt unreachable): the attempt the lease counted is given back.
WITH failed AS (
    UPDATE requests r SET
        state = CASE WHEN u.retry_at IS NULL THEN 'dead' ELSE 'queued' END,
        attempts = r.attempts - CASE WHEN u.counted THEN 0 ELSE 1 END,
        ready_at = coalesce(u.retry_at, r.ready_at),
        dead_reason = u.dead_reason,
        last_error = u.error,
        status = u.status,
        finished_at = CASE WHEN u.retry_at IS NULL THEN $1::float8 END,
        lease_owner = NULL,
        fetcher = coalesce(u.refetch, r.fetcher),
        run = (SELECT run FROM jobs j WHERE j.id = r.job_id)
    FROM unnest($2::bigint[], $3::bigint[], $4::float8[], $5::text[], $6::text[], $7::int[],
                $8::text[], $9::text[], $10::bool[], $11::text[])
         AS u(id, token, retry_at, dead_reason, error, status, outcome, route, counted, refetch)
    WHERE r.id = u.id AND r.lease_token = u.token AND r.state = 'leased'
    RETURNING r.id, r.domain, r.job_id, r.attempts + CASE WHEN u.counted THEN 0 ELSE 1 END AS n,
              u.outcome, u.status, u.error, coalesce(u.route, r.lease_route) AS route,
              coalesce(r.lease_route, 'direct') AS lane_route
), history AS (
    INSERT INTO attempts (request_id, n, at, outcome, status, error, route)
    SELECT id, n, $1::float8, outcome, status, error, route FROM failed
)
SELECT id, domain, lane_route, job_id FROM failed;

-- name: release
UPDATE requests r SET
    state = 'queued', attempts = r.attempts - 1, ready_at = $1, lease_owner = NULL
FROM unnest($2::bigint[], $3::bigint[]) AS u(id, token)
WHERE r.id = u.id AND r.lease_token = u.token AND r.state = 'leased'
RETURNING r.id, r.domain, coalesce(r.lease_route, 'direct');

-- name: upsert_records
-- A record key is one record: a refetch replaces it, never duplicates it. The caller keeps the
-- last of several rows with one key (DO UPDATE may touch a row once per statement) and sorts them.
-- Its status in the run compares it with the version of the last run that saw it: the first
-- write in a run (records.run < the run) compares with the stored version, a later one in the
-- same run with the run's base (previous once the run changed it, the stored version while
-- unchanged). A record back after its removal is new again. "same": equal hashes (or, for a row
-- stored before hashes, equal data).
INSERT INTO records AS rec (job_id, key, data, url, fetched_at, warc_file, warc_record_id,
                            warc_refers_to_file, warc_refers_to, hash, request_id, run,
                            updated_at, first_run, changed_run, status)
SELECT u.job_id, u.key, u.data, u.url, u.fetched_at, u.warc_file, u.warc_record_id,
       u.warc_refers_to_file, u.warc_refers_to, u.hash, u.request_id, u.run, $1, u.run, u.run,
       'new'
FROM unnest($2::bigint[], $3::text[], $4::jsonb[], $5::text[], $6::float8[], $7::text[],
            $8::text[], $9::text[], $10::text[], $11::bytea[], $12::bigint[], $13::int[])
     AS u(job_id, key, data, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file,
          warc_refers_to, hash, request_id, run)
ON CONFLICT (job_id, key) DO UPDATE SET
    status = CASE
        WHEN rec.run < excluded.run AND rec.status = 'removed' THEN 'new'
        WHEN rec.run < excluded.run
             AND (rec.hash = excluded.hash
                  OR (rec.hash IS NULL AND rec.data = excluded.data)) THEN 'unchanged'
        WHEN rec.run < excluded.run THEN 'changed'
        WHEN rec.status = 'new' THEN 'new'
        WHEN rec.status = 'unchanged'
             AND (rec.hash = excluded.hash
                  OR (rec.hash IS NULL AND rec.data = excluded.data)) THEN 'unchanged'
        WHEN rec.status = 'unchanged' THEN 'changed'
        WHEN rec.prev_hash = excluded.hash THEN 'unchanged'
        ELSE 'changed' END,
    previous = CASE WHEN (rec.run < excluded.run OR rec.status = 'unchanged')
                         AND (rec.status = 'removed'
                              OR NOT (rec.hash IS NOT DISTINCT FROM excluded.hash
                                      OR (rec.hash IS NULL AND rec.data = excluded.data)))
                    THEN rec.data ELSE rec.previous END,
    prev_hash = CASE WHEN (rec.run < excluded.run OR rec.status = 'unchanged')
                          AND (rec.status = 'removed'
                               OR NOT (rec.hash IS NOT DISTINCT FROM excluded.hash
                                       OR (rec.hash IS NULL AND rec.data = excluded.data)))
                     THEN rec.hash ELSE rec.prev_hash END,
    changed_run = CASE WHEN (rec.run < excluded.run OR rec.status = 'unchanged')
                            AND (rec.status = 'removed'
                                 OR NOT (rec.hash IS NOT DISTINCT FROM excluded.hash
                                         OR (rec.hash IS NULL AND rec.data = excluded.data)))
                       THEN excluded.run ELSE rec.changed_run END,
    first_run = CASE WHEN rec.status = 'removed' THEN excluded.run ELSE rec.first_run END,
    removed_run = NULL,
    run = excluded.run,
    data = excluded.data, hash = excluded.hash, url = excluded.url,
    fetched_at = excluded.fetched_at, request_id = excluded.request_id,
    warc_file = excluded.warc_file, warc_record_id = excluded.warc_record_id,
    warc_refers_to_file = excluded.warc_refers_to_file, warc_refers_to = excluded.warc_refers_to,
    updated_at = excluded.updated_at;

-- name: keep_versions
-- record_history > 1: the versions a write is about to replace go to record_versions first
-- (only a first write of the run that changes the record: what the run compares with)
INSERT INTO record_versions (job_id, key, replaced_run, data)
SELECT r.job_id, r.key, u.run, r.data
FROM unnest($1::bigint[], $2::text[], $3::int[], $4::bytea[]) AS u(job_id, key, run, hash)
JOIN records r ON r.job_id = u.job_id AND r.key = u.key
WHERE r.run < u.run AND r.status <> 'removed' AND r.hash IS DISTINCT FROM u.hash;

-- name: insert_quarantine
INSERT INTO quarantine (job_id, url, data, errors, fetched_at, warc_file, warc_record_id,
                        warc_refers_to_file, warc_refers_to, run)
SELECT u.*, (SELECT run FROM jobs j WHERE j.id = u.job_id)
FROM unnest($1::bigint[], $2::text[], $3::jsonb[], $4::jsonb[], $5::float8[],
            $6::text[], $7::text[], $8::text[], $9::text[])
     AS u(job_id, url, data, errors, fetched_at, warc_file, warc_record_id,
          warc_refers_to_file, warc_refers_to);

-- name: insert_content
INSERT INTO content (job_id, hash, request_id)
SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bigint[])
ON CONFLICT (job_id, hash) DO NOTHING;

-- name: note_duplicates
-- after insert_content: a request whose content a previous request of the job had points at it
-- (its row is already locked by this transaction's complete)
UPDATE requests r SET duplicate_of = c.request_id
FROM unnest($1::bigint[], $2::bytea[], $3::bigint[]) AS u(job_id, hash, id)
JOIN content c ON c.job_id = u.job_id AND c.hash = u.hash
WHERE r.id = u.id AND c.request_id <> u.id;

-- name: count_states
SELECT
    count(*) FILTER (WHERE state = 'queued' AND ready_at <= $1),
    count(*) FILTER (WHERE state = 'queued' AND ready_at > $1),
    count(*) FILTER (WHERE state = 'leased'),
    count(*) FILTER (WHERE state = 'done'),
    count(*) FILTER (WHERE state = 'dead'),
    count(*) FILTER (WHERE attempts > 1),
    coalesce(sum(attempts - 1) FILTER (WHERE state IN ('done', 'dead') AND attempts > 0), 0),
    min(created_at) FILTER (WHERE state = 'queued' AND ready_at <= $1),
    (SELECT count(*) FROM records WHERE job_id = $2 AND status <> 'removed'),
    (SELECT count(*) FROM quarantine WHERE job_id = $2),
    count(*) FILTER (WHERE duplicate_of IS NOT NULL),
    count(*) FILTER (WHERE state = 'done' AND status >= 400)
FROM requests WHERE job_id = $2;

-- name: attempts_histogram
-- finished requests by attempts taken (traps, never fetched, have 0 and are left out)
SELECT attempts, count(*)::int FROM requests
WHERE job_id = $1 AND state IN ('done', 'dead') AND attempts > 0
GROUP BY attempts;

-- name: robots_waiting
-- the hosts whose requests wait for their robots.txt (retried without using an attempt while
-- it cannot be read): progress and status name them, so that no request waits unseen
SELECT domain, count(*)::int, max(last_error) FROM requests
WHERE job_id = $1 AND state = 'queued' AND last_error LIKE 'robots.txt unreachable (%'
GROUP BY domain ORDER BY count(*) DESC, domain LIMIT 5;

-- name: budget_traps
-- the requests a host or URL-shape budget refused: the dead(trap) rows of a budget (their URLs:
-- a sample per rule) and the counts past the sample (``domain<TAB>rule<TAB>pattern`` keys)
SELECT last_error, url, domain, 1 FROM requests
WHERE job_id = $1 AND state = 'dead' AND dead_reason = 'trap'
  AND last_error IN ('trap: host_budget', 'trap: pattern_budget')
UNION ALL
SELECT NULL, key, NULL, used FROM budgets
WHERE job_id = $1 AND kind = 'trap_dropped';

-- name: traps_by_domain
-- the traps (the dead(trap) rows plus those only counted, past their rule's sample) and the rows
SELECT domain, sum(n)::int, sum(kept)::int FROM (
    SELECT domain, count(*) AS n, count(*) AS kept FROM requests
    WHERE job_id = $1 AND state = 'dead' AND dead_reason = 'trap'
    GROUP BY domain
    UNION ALL
    SELECT split_part(key, E'\t', 1) AS domain, used AS n, 0 AS kept FROM budgets
    WHERE job_id = $1 AND kind = 'trap_dropped'
) t
GROUP BY domain;

-- name: unfinished
SELECT 1 FROM requests WHERE job_id = $1 AND state IN ('queued', 'leased') LIMIT 1;

-- name: iter_records
SELECT key, data::text, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file,
       warc_refers_to
FROM records
WHERE job_id = $1 AND key > $2 AND status <> 'removed' ORDER BY key LIMIT $3;

-- name: iter_quarantine
SELECT id, data::text, errors::text, url, fetched_at, warc_file, warc_record_id,
       warc_refers_to_file, warc_refers_to
FROM quarantine
WHERE job_id = $1 AND id > $2 ORDER BY id LIMIT $3;

-- name: dead_letters
SELECT r.id, j.name, r.url, r.dead_reason, r.last_error, r.attempts, r.finished_at
FROM requests r JOIN jobs j ON j.id = r.job_id
WHERE r.state = 'dead' AND ($1::text IS NULL OR j.name = $1)
  AND ($2::text IS NULL OR r.dead_reason = $2)
ORDER BY r.finished_at DESC, r.id
LIMIT $3;

-- name: dead_letter
SELECT r.id, j.name, r.url, r.dead_reason, r.last_error, r.attempts, r.finished_at
FROM requests r JOIN jobs j ON j.id = r.job_id
WHERE r.state = 'dead' AND r.id = $1;

-- name: attempts_of
SELECT n, at, outcome, status, error, route FROM attempts WHERE request_id = $1 ORDER BY n, at;

-- name: replay_dead_ids
UPDATE requests SET state = 'queued', attempts = 0, ready_at = $1, dead_reason = NULL,
    finished_at = NULL
WHERE state = 'dead' AND id = ANY ($2::bigint[]);

-- name: replay_dead_where
UPDATE requests r SET state = 'queued', attempts = 0, ready_at = $1, dead_reason = NULL,
    finished_at = NULL
FROM jobs j
WHERE r.state = 'dead' AND j.id = r.job_id
  AND ($2::text IS NULL OR j.name = $2) AND ($3::text IS NULL OR r.dead_reason = $3);

-- name: migration_0011_records_updated
-- Records in update order per job, for readers that follow a crawl's records as they are
-- stored (crawl -o streams them to its file): a range of this index per poll, not a scan and
-- sort of every record of the job.
CREATE INDEX records_updated ON records (job_id, updated_at, key);

-- name: job_requests
SELECT count(*), count(*) FILTER (WHERE state = 'leased') FROM requests WHERE job_id = $1;

-- name: delete_job
-- crawl --fresh: the job and everything of it (its WARC files are not the store's), sessions
-- included, in one transaction; what it learnt of its pages' fetchers stays (page_types).
WITH gone_attempts AS (
    DELETE FROM attempts WHERE request_id IN (SELECT id FROM requests WHERE job_id = $1)
), gone_content AS (
    DELETE FROM content WHERE job_id = $1
), gone_budgets AS (
    DELETE FROM budgets WHERE job_id = $1
), gone_records AS (
    DELETE FROM records WHERE job_id = $1
), gone_quarantine AS (
    DELETE FROM quarantine WHERE job_id = $1
), gone_sessions AS (
    DELETE FROM sessions WHERE job_id = $1
), gone_runs AS (
    DELETE FROM runs WHERE job_id = $1
), gone_versions AS (
    DELETE FROM record_versions WHERE job_id = $1

), gone_profiles AS (
    DELETE FROM run_profiles WHERE job_id = $1
), gone_sinks AS (
    DELETE FROM sink_progress WHERE job_id = $1
)
DELETE FROM requests WHERE job_id = $1;

-- name: delete_job_row
DELETE FROM jobs WHERE id = $1;

-- name: job_activity
SELECT (SELECT max(finished_at) FROM requests
        WHERE job_id = $1 AND state IN ('done', 'dead')),
       (SELECT max(updated_at) FROM records WHERE job_id = $1);

-- name: dead_by_reason
SELECT coalesce(dead_reason, 'too_many_retries'), count(*)::int FROM requests
WHERE job_id = $1 AND state = 'dead'
GROUP BY 1;

-- name: lease_holders
SELECT lease_owner, count(*)::int, max(lease_expires_at) FROM requests
WHERE job_id = $1 AND state = 'leased'
GROUP BY lease_owner ORDER BY lease_owner;

-- name: records_since
-- keyset on (updated_at, key) along records_updated; a NULL key skips every record of $2
SELECT updated_at, key, data::text, url, fetched_at, warc_file, warc_record_id,
       warc_refers_to_file, warc_refers_to
FROM records
WHERE job_id = $1 AND updated_at >= $2
  AND (updated_at > $2 OR ($3::text IS NOT NULL AND key > $3)) AND status <> 'removed'
ORDER BY updated_at, key
LIMIT $4;

-- name: lock_job
-- delete_job: a concurrent submit or delete of the same job waits for this one to commit
SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE;

-- name: migration_0012_worker_stats
-- What each worker process reports every few seconds (its counters as crawlfleet.metrics
-- serialises them, and its gauges), one row per process (a worker id and its start time: a
-- restarted worker of the same id adds a row, so no count is lost), kept after it exits: the
-- fleet's totals are the sums over the rows, so serve and status show them without a
-- Prometheus server; last_seen tells the live workers from the gone.
CREATE TABLE worker_stats (
    worker     text NOT NULL,
    started_at double precision NOT NULL,
    kinds      text NOT NULL,
    host       text NOT NULL,
    pid        integer NOT NULL,
    last_seen  double precision NOT NULL,
    counters   text NOT NULL,
    gauges     text NOT NULL,
    PRIMARY KEY (worker, started_at)
);

-- name: migration_0015_request_headers
-- A request's own headers (a spider's Request(headers=...), a form's Content-Type), as a JSON
-- object; NULL for the many requests that have none. Sent as they are by the fetcher, under the
-- address guard and the session's cookies.
ALTER TABLE requests ADD COLUMN headers text;


-- name: migration_0016_requests_vacuum
-- A crawl's requests table churns: every lease and completion rewrites a row (state moves, so
-- never a HOT update), and the partial indexes the lease and rescue walk (requests_ready,
-- requests_leased, requests_owner) keep the dead entries until a vacuum. The defaults wait for
-- 20% of the table to be dead: two million rows in a frontier of ten million, scanned by every
-- lease meanwhile. Vacuum and analyze this table after 1% instead (and after 1% new rows, so
-- the planner's statistics follow a frontier that grows by bulk enqueues).
ALTER TABLE requests SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.01
);

-- name: save_worker_stats
INSERT INTO worker_stats (worker, started_at, kinds, host, pid, last_seen, counters, gauges)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (worker, started_at) DO UPDATE SET
    kinds = excluded.kinds, last_seen = excluded.last_seen,
    counters = excluded.counters, gauges = excluded.gauges;

-- name: worker_stats
SELECT worker, started_at, kinds, host, pid, last_seen, counters, gauges
FROM worker_stats WHERE last_seen >= $1 ORDER BY worker, started_at;

-- name: queue_by_domain
-- The backlog per job and domain, and when each one's oldest ready request was queued. Only
-- unfinished rows are read (requests_job_state narrows every job to its queued and leased
-- ones), so the cost follows the backlog, not the crawl's history.
SELECT j.name, r.domain,
       count(*) FILTER (WHERE r.state = 'queued' AND r.ready_at <= $1)::int,
       count(*) FILTER (WHERE r.state = 'queued' AND r.ready_at > $1)::int,
       count(*) FILTER (WHERE r.state = 'leased')::int,
       min(r.created_at) FILTER (WHERE r.state = 'queued' AND r.ready_at <= $1)
FROM jobs j JOIN requests r ON r.job_id = j.id AND r.state IN ('queued', 'leased')
GROUP BY j.name, r.domain;

-- name: lane_rows
-- every lane with its route's pool and its domain's caps, the most recently served first
SELECT l.domain, l.route, coalesce(r.pool, l.route), l.tier, l.in_flight, l.concurrency,
       l.max_in_flight, l.delay, l.next_at, l.blocked_until, l.health,
       d.tier, d.in_flight, d.max_in_flight
FROM lanes l JOIN domains d ON d.domain = l.domain LEFT JOIN routes r ON r.id = l.route
ORDER BY l.last_lease_at DESC, l.domain, l.route
LIMIT $1;

-- name: route_rows
SELECT id, pool, tier, breaker, open_until FROM routes ORDER BY pool, id;

-- name: attempts_by_outcome
-- the attempts history holds failed attempts only: blocks, errors, expired leases
SELECT outcome, count(*)::int FROM attempts GROUP BY outcome;

-- name: tier_move_counts
SELECT count(*) FILTER (WHERE to_tier > from_tier)::int,
       count(*) FILTER (WHERE to_tier < from_tier)::int
FROM tier_moves;

-- name: blocked_attempts
SELECT count(*)::int FROM attempts a JOIN requests r ON r.id = a.request_id
WHERE r.job_id = $1 AND a.outcome = 'blocked';

-- name: quarantine_items
SELECT q.id, j.name, q.url, q.data::text, q.errors::text, q.fetched_at, q.warc_file,
       q.warc_record_id, q.warc_refers_to_file, q.warc_refers_to
FROM quarantine q JOIN jobs j ON j.id = q.job_id
WHERE ($1::text IS NULL OR j.name = $1)
ORDER BY q.id DESC
LIMIT $2;

-- name: quarantine_item
SELECT q.id, j.name, q.url, q.data::text, q.errors::text, q.fetched_at, q.warc_file,
       q.warc_record_id, q.warc_refers_to_file, q.warc_refers_to
FROM quarantine q JOIN jobs j ON j.id = q.job_id
WHERE q.id = $1;

-- name: migration_0017_pinned_requests
-- A request may be pinned to route pools (Request(pool=...)): its pool column holds their names
-- as ',a,b,' (NULL: not pinned), and it is leased only on lanes whose route is in one of them,
-- whatever the domain's route tier. A lane is shared (the domain's own requests use it: every
-- lane so far) and/or pinned (requests pinned to its route's pool were queued for its domain:
-- it is leased on whatever its tier).
ALTER TABLE requests ADD COLUMN pool text;
ALTER TABLE lanes
    ADD COLUMN shared integer NOT NULL DEFAULT 1,
    ADD COLUMN pinned integer NOT NULL DEFAULT 0;
-- whether a domain has pinned requests queued at all: a lane only they use is passed over when
-- it has none (without reading the domain's other requests)
CREATE INDEX requests_pinned ON requests (domain, priority DESC, id)
    WHERE state = 'queued' AND pool IS NOT NULL;

-- name: migration_0018_fetcher_kind_statistics
-- The lease's pick filters a domain's queued requests on their fetcher kind, an expression the
-- planner knows nothing of without statistics on it: it took one request in 200 to pass, so at
-- ~10,000 queued requests a domain it read them all and sorted them (42 ms) instead of walking
-- requests_ready in order until the batch is full (0.2 ms). The expression here is the pick's,
-- written the same way (the planner matches them as written). PostgreSQL 14 and later.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'CREATE STATISTICS IF NOT EXISTS requests_fetcher_kind ON '
                '(CASE WHEN fetcher = ''browser'' THEN ''browser'' ELSE ''http'' END) '
                'FROM requests';
    END IF;
END
$$;

-- name: migration_0020_runs
-- Schema version 20: recurring crawls. A job has runs (run 1 its first crawl; crawl --recrawl,
-- a schedule or --fresh start the next); jobs.run is the current one. A run's counters are read
-- from the rows it touched while it goes (no shared counter row on the workers' hot path), and
-- kept in its row once it finished.
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
ALTER TABLE jobs ADD COLUMN run integer NOT NULL DEFAULT 1;
CREATE TABLE runs (
    job_id      bigint NOT NULL,
    run         integer NOT NULL,
    kind        text NOT NULL,
    state       text NOT NULL DEFAULT 'running',
    started_at  double precision NOT NULL,
    finished_at double precision,
    schedule    text,
    counters    jsonb,
    PRIMARY KEY (job_id, run)
);
INSERT INTO runs (job_id, run, kind, state, started_at)
SELECT id, 1, 'first', 'running', created_at FROM jobs;
ALTER TABLE requests
    ADD COLUMN run integer,
    ADD COLUMN first_run integer NOT NULL DEFAULT 1,
    ADD COLUMN found_by bigint,
    ADD COLUMN page text,
    ADD COLUMN due_at double precision,
    ADD COLUMN visit text,
    ADD COLUMN nbytes bigint,
    ADD COLUMN listed integer NOT NULL DEFAULT 0,
    ADD COLUMN lastmod double precision;
UPDATE requests SET run = 1 WHERE state IN ('done', 'dead');
ALTER TABLE records
    ADD COLUMN hash bytea,
    ADD COLUMN status text NOT NULL DEFAULT 'new',
    ADD COLUMN run integer NOT NULL DEFAULT 1,
    ADD COLUMN first_run integer NOT NULL DEFAULT 1,
    ADD COLUMN changed_run integer NOT NULL DEFAULT 1,
    ADD COLUMN removed_run integer,
    ADD COLUMN previous jsonb,
    ADD COLUMN prev_hash bytea,
    ADD COLUMN request_id bigint;
-- a 304 carries its page's records over; a run's end finds the records its pages no longer yield
CREATE INDEX records_request ON records (job_id, request_id);
ALTER TABLE quarantine ADD COLUMN run integer NOT NULL DEFAULT 1;
CREATE TABLE record_versions (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id       bigint NOT NULL,
    key          text COLLATE "C" NOT NULL,
    replaced_run integer NOT NULL,
    data         jsonb NOT NULL
);
CREATE INDEX record_versions_key ON record_versions (job_id, key, replaced_run);

-- name: migration_0021_schedules
-- Schema version 21: schedules, one per job (by name), in the store so a fleet has one. next_at
-- is when the next run is due; whoever runs with the store starts it and moves next_at on in
-- the same transaction, the schedule's row locked (FOR UPDATE SKIP LOCKED): exactly once.
-- queued: a due run waits for the last one to finish (overlap = queue).
CREATE TABLE schedules (
    job        text PRIMARY KEY,
    spider     text NOT NULL,
    every      double precision,
    cron       text,
    tz         text NOT NULL DEFAULT 'UTC',
    anchor     double precision NOT NULL,
    overlap    text NOT NULL DEFAULT 'skip',
    next_at    double precision NOT NULL,
    queued     boolean NOT NULL DEFAULT false,
    last_at    double precision,
    last_run   integer,
    last_note  text,
    created_at double precision NOT NULL
);

-- name: job_runs
SELECT id, run FROM jobs WHERE id = ANY($1::bigint[]);

-- name: run_of_job
SELECT run FROM jobs WHERE id = $1;

-- name: carry_records
-- pages that did not change (a 304, or the same body when the spider skips those): their
-- records are carried over into the run, unchanged (their update time stays: nothing new)
UPDATE records r SET run = j.run, status = 'unchanged'
FROM unnest($1::bigint[], $2::bigint[]) AS u(job_id, id)
JOIN jobs j ON j.id = u.job_id
WHERE r.job_id = u.job_id AND r.request_id = u.id AND r.run < j.run AND r.status <> 'removed';

-- name: relist
-- pages a sitemap lists again with a newer lastmod: revisited in this run, due or not
UPDATE requests r SET
    lastmod = u.lastmod, listed = 1,
    state = CASE WHEN r.state = 'done' AND coalesce(r.run, 0) < $2 THEN 'queued' ELSE r.state END,
    ready_at = CASE WHEN r.state = 'done' AND coalesce(r.run, 0) < $2 THEN $3 ELSE r.ready_at END,
    attempts = CASE WHEN r.state = 'done' AND coalesce(r.run, 0) < $2 THEN 0 ELSE r.attempts END
FROM unnest($4::bytea[], $5::float8[]) AS u(fingerprint, lastmod)
WHERE r.job_id = $1 AND r.fingerprint = u.fingerprint
  AND (r.lastmod IS NULL OR r.lastmod < u.lastmod);

-- name: current_run
SELECT r.job_id, j.name, r.run, r.kind, r.state, r.started_at, r.finished_at, r.schedule,
       r.counters::text
FROM runs r JOIN jobs j ON j.id = r.job_id
WHERE r.job_id = $1 AND r.run = j.run;

-- name: runs_of
SELECT r.job_id, j.name, r.run, r.kind, r.state, r.started_at, r.finished_at, r.schedule,
       r.counters::text
FROM runs r JOIN jobs j ON j.id = r.job_id
WHERE r.job_id = $1 ORDER BY r.run DESC LIMIT $2;

-- name: running_runs
-- the runs still marked running, their job's row locked (one process ends a run; another one
-- skips it)
SELECT j.id, j.name, j.run, r.kind FROM jobs j JOIN runs r ON r.job_id = j.id AND r.run = j.run
WHERE r.state = 'running'
ORDER BY j.id
FOR UPDATE OF j SKIP LOCKED;

-- name: lock_job_run
SELECT run FROM jobs WHERE id = $1 FOR UPDATE;

-- name: run_pages
SELECT count(*) FILTER (WHERE state = 'done'),
       count(*) FILTER (WHERE state = 'done' AND visit = 'not_modified'),
       count(*) FILTER (WHERE state = 'done' AND visit = 'unchanged'),
       count(*) FILTER (WHERE state = 'done' AND visit = 'changed'),
       count(*) FILTER (WHERE state = 'done' AND visit = 'new'),
       count(*) FILTER (WHERE state = 'done' AND status >= 400),
       count(*) FILTER (WHERE state = 'dead'),
       coalesce(sum(nbytes) FILTER (WHERE state = 'done'), 0)
FROM requests WHERE job_id = $1 AND run = $2;

-- name: run_records
SELECT count(*) FILTER (WHERE run = $2 AND status = 'new'),
       count(*) FILTER (WHERE run = $2 AND status = 'changed'),
       count(*) FILTER (WHERE run = $2 AND status = 'unchanged'),
       count(*) FILTER (WHERE status = 'removed' AND removed_run = $2),
       (SELECT count(*) FROM quarantine WHERE job_id = $1 AND run = $2)
FROM records WHERE job_id = $1;

-- name: mark_removed
-- the end of a run: records whose page it fetched (done: a 404 or 410 too) and that no page
-- yielded in it are removed, kept with their last values
UPDATE records SET status = 'removed', removed_run = $2
WHERE job_id = $1 AND run < $2 AND status <> 'removed'
  AND request_id IN (SELECT id FROM requests WHERE job_id = $1 AND run = $2 AND state = 'done');

-- name: fresh_replace
-- the end of a --fresh run: what it did not find again goes, and what it found starts its
-- history anew
WITH gone AS (
    DELETE FROM records WHERE job_id = $1 AND run < $2
), renewed AS (
    UPDATE records SET status = 'new', previous = NULL, prev_hash = NULL, first_run = $2,
        changed_run = $2, removed_run = NULL
    WHERE job_id = $1 AND run = $2
), versions AS (
    DELETE FROM record_versions WHERE job_id = $1
)
DELETE FROM quarantine WHERE job_id = $1 AND run < $2;

-- name: trim_versions
-- record_history = N: the newest N older versions of each record stay (previous is the newest)
DELETE FROM record_versions WHERE id IN (
    SELECT id FROM (
        SELECT id, row_number() OVER (PARTITION BY key ORDER BY replaced_run DESC, id DESC) AS n
        FROM record_versions WHERE job_id = $1) v
    WHERE v.n > $2);

-- name: finish_run
UPDATE runs SET state = 'finished', finished_at = $3, counters = $4::jsonb
WHERE job_id = $1 AND run = $2 AND state = 'running';

-- name: abandon_run
UPDATE runs SET state = 'abandoned', finished_at = $3, counters = $4::jsonb
WHERE job_id = $1 AND run = $2 AND state = 'running';

-- name: insert_run
INSERT INTO runs (job_id, run, kind, state, started_at, schedule)
VALUES ($1, $2, $3, 'running', $4, $5);

-- name: set_job_run
UPDATE jobs SET run = $2 WHERE id = $1;

-- name: requeue_due
-- a new run revisits the job's pages that are due (revisit.is_due: no interval, due by now, a
-- seed, or a hub: a page that found pages new in the last run); its attempts start afresh
UPDATE requests SET state = 'queued', ready_at = $2, attempts = 0, lease_owner = NULL,
    finished_at = NULL, dead_reason = NULL, last_error = NULL
WHERE job_id = $1 AND state = 'done'
  AND (due_at IS NULL OR due_at <= $2 OR depth = 0
       OR id IN (SELECT found_by FROM requests
                 WHERE job_id = $1 AND first_run = $3 AND found_by IS NOT NULL));

-- name: drop_requests
-- --fresh: the job's requests and their history go when its new run starts; its records and
-- quarantine stay readable until that run finished (fresh_replace)
WITH gone_attempts AS (
    DELETE FROM attempts WHERE request_id IN (SELECT id FROM requests WHERE job_id = $1)
), gone_content AS (
    DELETE FROM content WHERE job_id = $1
), gone_budgets AS (
    DELETE FROM budgets WHERE job_id = $1
), gone_sessions AS (
    DELETE FROM sessions WHERE job_id = $1
)
DELETE FROM requests WHERE job_id = $1;

-- name: iter_all_records
-- export --removed: every record with its status, the removed ones too
SELECT key, data::text, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file,
       warc_refers_to, status, run, first_run, changed_run, removed_run, previous::text
FROM records
WHERE job_id = $1 AND key > $2 ORDER BY key LIMIT $3;

-- name: iter_changes
-- export --changes [--since RUN]: records new, changed or removed in a run since $2
SELECT key, data::text, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file,
       warc_refers_to, status, run, first_run, changed_run, removed_run, previous::text
FROM records
WHERE job_id = $1 AND key > $3
  AND (changed_run >= $2 OR first_run >= $2 OR removed_run >= $2)
ORDER BY key LIMIT $4;

-- name: versions_since
-- the oldest version of each of these records replaced in a run since $2: what it was before
SELECT DISTINCT ON (key) key, data::text FROM record_versions
WHERE job_id = $1 AND replaced_run >= $2 AND key = ANY($3::text[])
ORDER BY key, replaced_run, id;

-- name: list_schedules
SELECT job, spider, every, cron, tz, anchor, overlap, next_at, queued, last_at, last_run,
       last_note, created_at
FROM schedules ORDER BY job;

-- name: upsert_schedule
INSERT INTO schedules (job, spider, every, cron, tz, anchor, overlap, next_at, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (job) DO UPDATE SET
    spider = excluded.spider, every = excluded.every, cron = excluded.cron, tz = excluded.tz,
    anchor = excluded.anchor, overlap = excluded.overlap, next_at = excluded.next_at,
    queued = false;

-- name: delete_schedule
DELETE FROM schedules WHERE job = $1;

-- name: due_schedules
-- the schedules due now (or with a run queued), locked: a scheduler elsewhere in the fleet
-- skips them (SKIP LOCKED) and, once this transaction moved next_at on, no longer sees them due
SELECT job, spider, every, cron, tz, anchor, overlap, next_at, queued, last_at, last_run,
       last_note, created_at
FROM schedules WHERE next_at <= $1 OR queued
ORDER BY next_at
FOR UPDATE SKIP LOCKED;

-- name: schedule_ran
UPDATE schedules SET next_at = $2, queued = $3, last_at = coalesce($4, last_at),
    last_run = coalesce($5, last_run), last_note = $6
WHERE job = $1;

-- name: migration_0030_outbox
-- What leaves the machine goes through an outbox in the store (see sqlite.sql for the whole
-- story): outbox_events holds each event once (its key is the Idempotency-Key; the body is
-- text, the bytes every destination is sent, not jsonb, which would reorder its keys), outbox
-- one delivery per event and destination, leased like a request (token, expiry, SKIP LOCKED).
CREATE TABLE outbox_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        text NOT NULL UNIQUE,
    kind       text NOT NULL,
    job        text,
    run        integer,
    body       text NOT NULL,
    created_at double precision NOT NULL
);
CREATE TABLE outbox (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id         bigint NOT NULL REFERENCES outbox_events (id) ON DELETE CASCADE,
    destination      text NOT NULL,
    state            text NOT NULL DEFAULT 'queued',
    attempts         integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL,
    ready_at         double precision NOT NULL,
    lease_owner      text,
    lease_token      bigint NOT NULL DEFAULT 0,
    lease_expires_at double precision,
    last_status      integer,
    last_error       text,
    created_at       double precision NOT NULL,
    done_at          double precision,
    CONSTRAINT outbox_delivery UNIQUE (event_id, destination)
);
CREATE INDEX outbox_ready ON outbox (destination, ready_at, id) WHERE state = 'queued';
CREATE INDEX outbox_leased ON outbox (lease_expires_at) WHERE state = 'leased';

-- name: migration_0031_run_profiles
-- Each run's data profile (JSON), checked by one process at a time while the run goes
-- (checked_at) and made final exactly once when it finished (see sqlite.sql).
CREATE TABLE run_profiles (
    job_id     bigint NOT NULL,
    run        integer NOT NULL,
    profile    text,
    final      boolean NOT NULL DEFAULT false,
    checked_at double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, run)
);

-- name: migration_0032_sink_progress
-- How far each records sink got through a finished run's changes (see sqlite.sql).
CREATE TABLE sink_progress (
    job_id    bigint NOT NULL,
    run       integer NOT NULL,
    sink      text NOT NULL,
    after_key text COLLATE "C" NOT NULL DEFAULT '',
    batches   integer NOT NULL DEFAULT 0,
    done      boolean NOT NULL DEFAULT false,
    PRIMARY KEY (job_id, run, sink)
);

-- name: emit_event
INSERT INTO outbox_events (key, kind, job, run, body, created_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (key) DO NOTHING
RETURNING id;

-- name: emit_delivery
INSERT INTO outbox (event_id, destination, max_attempts, ready_at, created_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (event_id, destination) DO NOTHING;

-- name: outbox_lost
UPDATE outbox SET state = 'dead', lease_owner = NULL, done_at = $1,
    last_error = coalesce(last_error || ' | ', '') || 'delivery lost (the process sending it died)'
WHERE state = 'leased' AND lease_expires_at < $1 AND attempts >= max_attempts;

-- name: outbox_lease
-- SKIP LOCKED: two deliverers picking at once take different rows, neither waits
UPDATE outbox o SET
    state = 'leased',
    attempts = o.attempts + 1,
    lease_token = o.lease_token + 1,
    lease_owner = $1,
    lease_expires_at = $2
FROM (
    SELECT id FROM outbox
    WHERE destination = ANY($3::text[])
      AND ((state = 'queued' AND ready_at <= $4) OR (state = 'leased' AND lease_expires_at < $4))
    ORDER BY ready_at, id
    LIMIT $5
    FOR UPDATE SKIP LOCKED
) pick
WHERE o.id = pick.id
RETURNING o.id, o.lease_token, o.destination, o.attempts, o.max_attempts, o.event_id;

-- name: outbox_bodies
SELECT id, key, kind, job, run, body FROM outbox_events WHERE id = ANY($1::bigint[]);

-- name: outbox_settle
UPDATE outbox SET
    state = $3::text,
    ready_at = coalesce($4::float8, ready_at),
    last_status = $5::integer,
    last_error = $6::text,
    lease_owner = NULL,
    done_at = CASE WHEN $3::text IN ('done', 'dead') THEN $7::float8 ELSE NULL END
WHERE id = $1 AND lease_token = $2 AND state = 'leased';

-- name: outbox_replay
UPDATE outbox SET state = 'queued', attempts = 0, ready_at = $1, done_at = NULL
WHERE state = 'dead' AND ($2::text IS NULL OR destination = $2)
  AND ($3::bigint[] IS NULL OR id = ANY($3::bigint[]));

-- name: outbox_prune
-- delivered (or dead) long ago: the deliveries ...
DELETE FROM outbox WHERE state IN ('done', 'dead') AND done_at < $1;

-- name: outbox_prune_events
-- ... then the events none of whose deliveries is left
DELETE FROM outbox_events e
WHERE e.created_at < $1 AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.event_id = e.id);

-- name: outbox_counts
SELECT destination,
       count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'leased'),
       count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'dead'),
       min(created_at) FILTER (WHERE state = 'queued'),
       (SELECT o2.last_error FROM outbox o2 WHERE o2.destination = o.destination
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
LIMIT $1;

-- name: outbox_events_of
SELECT key, kind, job, run, body, created_at FROM outbox_events
WHERE ($1::text IS NULL OR job = $1) AND ($2::text IS NULL OR kind = $2)
ORDER BY id DESC
LIMIT $3;

-- name: profile_insert
INSERT INTO run_profiles (job_id, run, checked_at) VALUES ($1, $2, 0)
ON CONFLICT (job_id, run) DO NOTHING;

-- name: profile_claim
UPDATE run_profiles SET checked_at = $3
WHERE job_id = $1 AND run = $2 AND NOT final AND checked_at <= $3::float8 - $4::float8;

-- name: profile_save
UPDATE run_profiles SET profile = $1 WHERE job_id = $2 AND run = $3 AND NOT final;

-- name: profile_finalize
UPDATE run_profiles SET profile = $3, final = true, checked_at = $4
WHERE job_id = $1 AND run = $2 AND NOT final;

-- name: profiles_of
SELECT run, profile, final FROM run_profiles
WHERE job_id = $1 AND profile IS NOT NULL
ORDER BY run DESC
LIMIT $2;

-- name: profile_fields
-- one pass over a run's records for every top-level field (see sqlite.sql); the median too
SELECT f.key,
       count(*),
       count(*) FILTER (WHERE f.value NOT IN ('null'::jsonb, '[]'::jsonb, '{}'::jsonb)
                        AND NOT (jsonb_typeof(f.value) = 'string'
                                 AND btrim(f.value #>> '{}', E' \t\n\r') = '')),
       count(*) FILTER (WHERE jsonb_typeof(f.value) = 'string'
                        AND btrim(f.value #>> '{}', E' \t\n\r') <> ''),
       count(DISTINCT f.value) FILTER (WHERE jsonb_typeof(f.value) = 'string'
                                       AND btrim(f.value #>> '{}', E' \t\n\r') <> ''),
       count(*) FILTER (WHERE jsonb_typeof(f.value) = 'number'),
       min((f.value #>> '{}')::float8) FILTER (WHERE jsonb_typeof(f.value) = 'number'),
       max((f.value #>> '{}')::float8) FILTER (WHERE jsonb_typeof(f.value) = 'number'),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY (f.value #>> '{}')::float8)
           FILTER (WHERE jsonb_typeof(f.value) = 'number')
FROM records r
CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(r.data) = 'object' THEN r.data
                                   ELSE '{}'::jsonb END) f
WHERE r.job_id = $1 AND r.run = $2 AND r.status <> 'removed'
GROUP BY f.key;

-- name: profile_median
-- (profile_fields has the median already: never read)
SELECT NULL::float8 WHERE $1::bigint IS NULL AND $2::text IS NULL AND $3::int IS NULL
  AND $4::int IS NULL;

-- name: profile_records
SELECT (SELECT count(*) FROM records WHERE job_id = $1 AND run = $2 AND status <> 'removed'),
       (SELECT count(*) FROM quarantine WHERE job_id = $1 AND run = $2);

-- name: run_requests
SELECT coalesce(sum(attempts - 1) FILTER (WHERE state IN ('done', 'dead') AND attempts > 0), 0),
       count(*) FILTER (WHERE state = 'dead' AND dead_reason = 'trap'),
       (SELECT count(*) FROM attempts a JOIN requests q ON q.id = a.request_id
        WHERE q.job_id = $1 AND a.outcome = 'blocked' AND a.at >= $3)
FROM requests WHERE job_id = $1 AND run = $2;

-- name: quarantine_reasons
SELECT coalesce(errors -> 0 ->> 'type', 'invalid'), count(*) FROM quarantine
WHERE job_id = $1 AND run = $2
GROUP BY 1;

-- name: records_missing
SELECT key, data::text, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file,
       warc_refers_to
FROM records
WHERE job_id = $1 AND run = $4 AND status <> 'removed'
  AND (coalesce(data -> $2::text, 'null'::jsonb) IN ('null'::jsonb, '[]'::jsonb, '{}'::jsonb)
       OR (jsonb_typeof(data -> $2::text) = 'string'
           AND btrim(data ->> $2::text, E' \t\n\r') = ''))
ORDER BY key
LIMIT $3;

-- name: blocked_examples
SELECT r.url, max(a.at), count(*) FROM attempts a JOIN requests r ON r.id = a.request_id
WHERE r.job_id = $1 AND a.outcome = 'blocked' AND a.at >= $2
GROUP BY r.url
ORDER BY max(a.at) DESC
LIMIT $3;

-- name: sink_start
INSERT INTO sink_progress (job_id, run, sink) VALUES ($1, $2, $3)
ON CONFLICT (job_id, run, sink) DO NOTHING;

-- name: sink_state
SELECT after_key, batches, done FROM sink_progress WHERE job_id = $1 AND run = $2 AND sink = $3;

-- name: sink_advance
UPDATE sink_progress SET after_key = $4, batches = batches + $6, done = $7
WHERE job_id = $1 AND run = $2 AND sink = $3 AND batches = $5 AND NOT done;

-- name: sink_records
SELECT key, data::text, url, fetched_at, warc_file, warc_record_id, warc_refers_to_file,
       warc_refers_to, status, previous::text
FROM records
WHERE job_id = $1 AND key > $2
  AND ((run = $4 AND status IN ('new', 'changed')) OR (status = 'removed' AND removed_run = $4))
ORDER BY key
LIMIT $3;

-- name: migration_0035_fetcher_kind_statistics_impersonate
-- The fetcher kinds are three (http, impersonate, browser): the pick's expression changed, and
-- the planner matches statistics to an expression as written, so migration 0018's statistics
-- are replaced by the same on the new expression.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'DROP STATISTICS IF EXISTS requests_fetcher_kind';
        EXECUTE 'CREATE STATISTICS IF NOT EXISTS requests_fetcher_kinds ON '
                '(CASE WHEN fetcher IN (''browser'', ''impersonate'') THEN fetcher '
                'ELSE ''http'' END) FROM requests';
    END IF;
END
$$;

-- name: migration_0045_robots_files
-- Schema version 45: the robots.txt each origin answered, shared by the fleet: a worker that
-- meets a host asks the store first, and fetches the file only when no worker has within its
-- lifetime (RobotsCache ttl). Only definite answers are kept: a file read (state ok, its text;
-- a file cut at the size limit is kept cut at its last whole line) or none to read (a 4xx or
-- too many redirects: allow_all). An unreachable one is the host's passing state, re-checked
-- by each worker. fetched_at: the store's clock.
CREATE TABLE robots_files (
    origin     text PRIMARY KEY,
    state      text NOT NULL,
    body       text NOT NULL DEFAULT '',
    fetched_at double precision NOT NULL
);

-- name: robots_file
-- the origin's shared robots.txt and its age in seconds
SELECT state, body, $2 - fetched_at FROM robots_files WHERE origin = $1;

-- name: save_robots_file
INSERT INTO robots_files (origin, state, body, fetched_at) VALUES ($1, $2, $3, $4)
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
    origin text PRIMARY KEY,
    since  double precision NOT NULL,
    seen   double precision NOT NULL,
    tries  integer NOT NULL DEFAULT 1
);

-- name: host_down
-- a worker could not connect to the origin now: its seconds down for the fleet, and its tries
INSERT INTO hosts_down (origin, since, seen, tries) VALUES ($1, $2, $2, 1)
ON CONFLICT (origin) DO UPDATE SET
    since = CASE WHEN $2 - hosts_down.seen > $3 THEN $2 ELSE hosts_down.since END,
    tries = CASE WHEN $2 - hosts_down.seen > $3 THEN 1 ELSE hosts_down.tries + 1 END,
    seen = greatest(hosts_down.seen, $2)
RETURNING $2 - since, tries;
