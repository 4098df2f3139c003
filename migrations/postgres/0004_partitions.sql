-- 0004: declarative partitioning of the log, the outbox and the timers (issue 18; the plan is in
-- migrations/README.md, "Partitions"). Existing rows are moved into the new tables; the old
-- tables are dropped at the end. The migration runs in one transaction.
--
-- - log_entries by the load's registration month (`load_month`, the UTC month of its first
--   entry), kept in the directory `load_months` so that every later append and read of the
--   load goes to that one partition;
-- - outbox by the day of `created_at` (UTC);
-- - timers by the load's registration month, like the log.
-- Every parent has a DEFAULT partition: a row whose range has no partition (a clock far in the
-- past, a partition not made ahead in time) is kept there, never refused. Retention deletes from
-- the default partitions; it drops whole partitions everywhere else.

-- The load directory: one row per load, written by the load's first append.
CREATE TABLE load_months (
    load_id    text NOT NULL,
    load_month date NOT NULL,  -- the first day of the UTC month of the load's first entry
    CONSTRAINT load_months_pkey PRIMARY KEY (load_id)
);
CREATE INDEX load_months_month_idx ON load_months (load_month, load_id);

-- Attaches partition `part` of `parent` for [lo, hi) of column `key` unless a table of that
-- name exists; rows of that range kept meanwhile in the default partition are moved into it.
-- Returns whether it created the partition. CREATE TABLE + ATTACH takes only SHARE UPDATE
-- EXCLUSIVE on the parent: appends, claims and reads go on while a partition is made.
CREATE FUNCTION load_agent_attach_partition(parent text, part text, key text, lo text, hi text)
RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    def text := parent || '_default';
    stray bigint;
BEGIN
    IF to_regclass(quote_ident(part)) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, parent);
    EXECUTE format('SELECT count(*) FROM %I WHERE %I >= %L AND %I < %L', def, key, lo, key, hi) INTO stray;
    IF stray > 0 THEN
        EXECUTE format(
            'WITH moved AS (DELETE FROM %I WHERE %I >= %L AND %I < %L RETURNING *) INSERT INTO %I SELECT * FROM moved',
            def, key, lo, key, hi, part);
    END IF;
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, part, lo, hi);
    RETURN true;
END
$fn$;

-- Monthly partitions of `parent` (log_entries, timers) for the months from `first` to `last`.
CREATE FUNCTION load_agent_ensure_months(parent text, first date, last date)
RETURNS SETOF text LANGUAGE plpgsql AS $fn$
DECLARE
    m date := date_trunc('month', first)::date;
BEGIN
    WHILE m <= last LOOP
        IF load_agent_attach_partition(parent, parent || to_char(m, '"_p"YYYY"_"MM'), 'load_month',
                                       m::text, (m + interval '1 month')::date::text) THEN
            RETURN NEXT parent || to_char(m, '"_p"YYYY"_"MM');
        END IF;
        m := (m + interval '1 month')::date;
    END LOOP;
END
$fn$;

-- Daily partitions of the outbox (by created_at, UTC days) for the days from `first` to `last`.
CREATE FUNCTION load_agent_ensure_days(first date, last date)
RETURNS SETOF text LANGUAGE plpgsql AS $fn$
DECLARE
    d date := first;
BEGIN
    WHILE d <= last LOOP
        IF load_agent_attach_partition('outbox', 'outbox' || to_char(d, '"_p"YYYY"_"MM"_"DD'), 'created_at',
                                       d::text || ' 00:00:00+00', (d + 1)::text || ' 00:00:00+00') THEN
            RETURN NEXT 'outbox' || to_char(d, '"_p"YYYY"_"MM"_"DD');
        END IF;
        d := d + 1;
    END LOOP;
END
$fn$;

-- ---------------------------------------------------------------------------------------------
-- The log.
ALTER TABLE log_entries RENAME TO log_entries_unpartitioned;
ALTER TABLE log_entries_unpartitioned RENAME CONSTRAINT log_entries_pkey TO log_entries_unpartitioned_pkey;
ALTER TABLE log_entries_unpartitioned RENAME CONSTRAINT log_entries_entry_id_key TO log_entries_unpartitioned_entry_id_key;

CREATE TABLE log_entries (
    load_id      text             NOT NULL,
    seq          bigint           NOT NULL,
    entry_id     text             NOT NULL,
    kind         text             NOT NULL,
    recorded_at  timestamptz      NOT NULL,
    llm_cost_usd double precision NOT NULL DEFAULT 0,
    schema_id    integer          NOT NULL,
    body         bytea            NOT NULL,
    load_month   date             NOT NULL,  -- = load_months.load_month of the load
    -- A unique index of a partitioned table must hold the partition key; the directory fixes one
    -- month per load, so these stay the per-load version check and duplicate check they were.
    CONSTRAINT log_entries_pkey PRIMARY KEY (load_id, seq, load_month),
    CONSTRAINT log_entries_entry_id_key UNIQUE (load_id, entry_id, load_month),
    CONSTRAINT log_entries_seq_positive CHECK (seq > 0)
) PARTITION BY RANGE (load_month);
CREATE TABLE log_entries_default PARTITION OF log_entries DEFAULT;

INSERT INTO load_months (load_id, load_month)
SELECT load_id, date_trunc('month', recorded_at AT TIME ZONE 'UTC')::date
FROM log_entries_unpartitioned WHERE seq = 1;

SELECT count(*) FROM load_agent_ensure_months('log_entries',
    least(coalesce((SELECT min(load_month) FROM load_months), current_date), current_date),
    (current_date + interval '2 months')::date);

-- A log without its first entry cannot exist (seq is contiguous from 1); were there one, it is
-- kept in the default partition rather than lost.
INSERT INTO log_entries (load_id, seq, entry_id, kind, recorded_at, llm_cost_usd, schema_id, body, load_month)
SELECT l.load_id, l.seq, l.entry_id, l.kind, l.recorded_at, l.llm_cost_usd, l.schema_id, l.body,
       coalesce(m.load_month, DATE '1970-01-01')
FROM log_entries_unpartitioned l LEFT JOIN load_months m ON m.load_id = l.load_id;

DROP TABLE log_entries_unpartitioned;

-- ---------------------------------------------------------------------------------------------
-- The outbox. `position` comes from a sequence (an identity column cannot be declared on a
-- partitioned table in Postgres 15); it keeps counting from where the old identity stopped.
ALTER TABLE outbox RENAME TO outbox_unpartitioned;
ALTER TABLE outbox_unpartitioned RENAME CONSTRAINT outbox_pkey TO outbox_unpartitioned_pkey;
DROP INDEX outbox_pending_idx;
DROP INDEX outbox_load_idx;
DROP INDEX outbox_dead_idx;
DROP INDEX outbox_dead_load_idx;

CREATE SEQUENCE outbox_positions AS bigint;
SELECT setval('outbox_positions', coalesce((SELECT max(position) FROM outbox_unpartitioned), 0) + 1, false);

CREATE TABLE outbox (
    id               text        NOT NULL,
    position         bigint      NOT NULL DEFAULT nextval('outbox_positions'),
    load_id          text        NOT NULL,
    load_version     bigint      NOT NULL,
    destination      text        NOT NULL,
    action           text        NOT NULL,
    status           text        NOT NULL DEFAULT 'pending',
    claim_token      uuid,
    lease_until      timestamptz,
    retry_at         timestamptz,
    attempts         integer     NOT NULL DEFAULT 0,
    first_attempt_at timestamptz,
    last_failure     text,
    receipt          text,
    created_at       timestamptz NOT NULL,
    dispatched_at    timestamptz,
    dead_at          timestamptz,
    -- The key must hold the partition key. An idempotency key is checked against every
    -- partition by the append before it writes (migrations/README.md, "Partitions").
    CONSTRAINT outbox_pkey PRIMARY KEY (id, created_at),
    CONSTRAINT outbox_status_check CHECK (status IN ('pending', 'dispatched', 'dead'))
) PARTITION BY RANGE (created_at);
ALTER SEQUENCE outbox_positions OWNED BY outbox.position;
CREATE TABLE outbox_default PARTITION OF outbox DEFAULT;
CREATE INDEX outbox_pending_idx ON outbox (position) WHERE status = 'pending';
CREATE INDEX outbox_load_idx ON outbox (load_id, destination, status, load_version, position);
CREATE INDEX outbox_dead_idx ON outbox (dead_at) WHERE status = 'dead';
CREATE INDEX outbox_dead_load_idx ON outbox (load_id, dead_at) WHERE status = 'dead';

-- Rows of the last week get their days' partitions; older ones (delivered long ago, or dead)
-- stay in the default partition, which retention empties by age.
SELECT count(*) FROM load_agent_ensure_days(
    least(coalesce((SELECT min(created_at AT TIME ZONE 'UTC')::date FROM outbox_unpartitioned
                    WHERE created_at >= current_date - 7), current_date), current_date),
    current_date + 7);

INSERT INTO outbox (id, position, load_id, load_version, destination, action, status, claim_token,
                    lease_until, retry_at, attempts, first_attempt_at, last_failure, receipt, created_at,
                    dispatched_at, dead_at)
SELECT id, position, load_id, load_version, destination, action, status, claim_token, lease_until,
       retry_at, attempts, first_attempt_at, last_failure, receipt, created_at, dispatched_at, dead_at
FROM outbox_unpartitioned;

DROP TABLE outbox_unpartitioned;

-- ---------------------------------------------------------------------------------------------
-- The timers, by the load's registration month. A timer of a load without a log (tests that
-- schedule timers directly) has month 1970-01 and lives in the default partition.
ALTER TABLE timers RENAME TO timers_unpartitioned;
ALTER TABLE timers_unpartitioned RENAME CONSTRAINT timers_pkey TO timers_unpartitioned_pkey;
DROP INDEX timers_due_idx;
DROP INDEX timers_load_idx;

CREATE TABLE timers (
    timer_id     text        NOT NULL,
    load_id      text,
    ask_id       text,
    attempt      integer,
    fire_at      timestamptz,
    status       text        NOT NULL,
    fired_at     timestamptz,
    cancelled_at timestamptz,
    load_month   date        NOT NULL,  -- the load's load_months.load_month (a timer id names its load)
    CONSTRAINT timers_pkey PRIMARY KEY (timer_id, load_month),
    CONSTRAINT timers_status_check CHECK (status IN ('scheduled', 'fired', 'cancelled')),
    CONSTRAINT timers_scheduled_complete CHECK (
        status = 'cancelled' OR (load_id IS NOT NULL AND ask_id IS NOT NULL
                                 AND attempt IS NOT NULL AND fire_at IS NOT NULL))
) PARTITION BY RANGE (load_month);
CREATE TABLE timers_default PARTITION OF timers DEFAULT;
CREATE INDEX timers_due_idx ON timers (fire_at, timer_id) WHERE status = 'scheduled';
CREATE INDEX timers_load_idx ON timers (load_id);

SELECT count(*) FROM load_agent_ensure_months('timers',
    least(coalesce((SELECT min(m.load_month) FROM timers_unpartitioned t
                    JOIN load_months m ON m.load_id = t.load_id), current_date), current_date),
    (current_date + interval '2 months')::date);

-- A tombstone (a cancel before its schedule) has no load_id; its id names the load
-- (tmr:{load_id}:ask:...), whose month a later schedule of that id will look in.
INSERT INTO timers (timer_id, load_id, ask_id, attempt, fire_at, status, fired_at, cancelled_at, load_month)
SELECT t.timer_id, t.load_id, t.ask_id, t.attempt, t.fire_at, t.status, t.fired_at, t.cancelled_at,
       coalesce(m.load_month, DATE '1970-01-01')
FROM timers_unpartitioned t
LEFT JOIN load_months m ON m.load_id = coalesce(t.load_id, substring(t.timer_id FROM '^tmr:(.*?):ask:'));

DROP TABLE timers_unpartitioned;
