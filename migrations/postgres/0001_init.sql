-- load-agent store, PostgreSQL (ADR 0003): the per-load log, the transactional outbox and the
-- durable timers. Every time column is written from the caller's clock (the store never reads
-- the database clock), so evals on a fake clock see consistent leases and due times.

-- One append-only log per load. version = seq of the last entry = number of entries.
CREATE TABLE log_entries (
    load_id      text             NOT NULL,
    seq          bigint           NOT NULL,  -- 1..n, contiguous per load
    entry_id     text             NOT NULL,  -- event id, or dec:{event_id} for a decision
    kind         text             NOT NULL,  -- event kind (sms, ping, ...) or 'decision'
    recorded_at  timestamptz      NOT NULL,  -- the event's time or the decision's time
    llm_cost_usd double precision NOT NULL DEFAULT 0,
    schema_id    integer          NOT NULL,  -- Avro writer schema of body
    body         bytea            NOT NULL,  -- Avro binary of the LogEntry
    CONSTRAINT log_entries_pkey PRIMARY KEY (load_id, seq),
    CONSTRAINT log_entries_entry_id_key UNIQUE (load_id, entry_id),
    CONSTRAINT log_entries_seq_positive CHECK (seq > 0)
);

-- The transactional outbox: one row per accepted action, written in the append's transaction.
CREATE TABLE outbox (
    id               text        NOT NULL,   -- the action's idempotency key
    position         bigint      GENERATED ALWAYS AS IDENTITY,  -- insertion (commit) order
    load_id          text        NOT NULL,
    load_version     bigint      NOT NULL,   -- the log version the decision committed at
    destination      text        NOT NULL,   -- sms, email, slack, tms, hero, load_status, timer
    action           text        NOT NULL,   -- serde JSON of load_agent_domain::Action
    status           text        NOT NULL DEFAULT 'pending',
    claim_token      uuid,                   -- the live claim, if any
    lease_until      timestamptz,
    retry_at         timestamptz,            -- not handed out before (retry or deferral)
    attempts         integer     NOT NULL DEFAULT 0,
    first_attempt_at timestamptz,            -- set on the first claim (retry budget anchor)
    last_failure     text,
    receipt          text,
    created_at       timestamptz NOT NULL,   -- the committing decision's time
    dispatched_at    timestamptz,
    dead_at          timestamptz,
    CONSTRAINT outbox_pkey PRIMARY KEY (id),
    CONSTRAINT outbox_status_check CHECK (status IN ('pending', 'dispatched', 'dead'))
);
-- Claim scan: pending rows in insertion order (small: dispatched and dead rows leave it).
CREATE INDEX outbox_pending_idx ON outbox (position) WHERE status = 'pending';
-- Per-load order probe ("is an earlier row of this load and destination still pending?") and
-- rows_for_load.
CREATE INDEX outbox_load_idx ON outbox (load_id, destination, status, load_version, position);
-- dead_since(t) for the dead-rows-per-hour metric.
CREATE INDEX outbox_dead_idx ON outbox (dead_at) WHERE status = 'dead';

-- Durable timers. A cancel of an unknown id leaves a tombstone (load_id NULL, status
-- 'cancelled') so that a later schedule of the same id stays cancelled.
CREATE TABLE timers (
    timer_id     text        NOT NULL,
    load_id      text,
    ask_id       text,
    attempt      integer,
    fire_at      timestamptz,
    status       text        NOT NULL,
    fired_at     timestamptz,
    cancelled_at timestamptz,
    CONSTRAINT timers_pkey PRIMARY KEY (timer_id),
    CONSTRAINT timers_status_check CHECK (status IN ('scheduled', 'fired', 'cancelled')),
    CONSTRAINT timers_scheduled_complete CHECK (
        status = 'cancelled' OR (load_id IS NOT NULL AND ask_id IS NOT NULL
                                 AND attempt IS NOT NULL AND fire_at IS NOT NULL))
);
-- due(now): scheduled timers by fire time.
CREATE INDEX timers_due_idx ON timers (fire_at, timer_id) WHERE status = 'scheduled';
CREATE INDEX timers_load_idx ON timers (load_id);
