-- load-agent store, SQLite (ADR 0003): the same tables as migrations/postgres/0001_init.sql.
-- Times are TEXT in one fixed-width UTC form, 'YYYY-MM-DDTHH:MM:SS.ffffffZ', so that they sort
-- and compare as strings and stay readable in audits. Every time comes from the caller's clock.

CREATE TABLE log_entries (
    load_id      TEXT    NOT NULL,
    seq          INTEGER NOT NULL CHECK (seq > 0),
    entry_id     TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    recorded_at  TEXT    NOT NULL,
    llm_cost_usd REAL    NOT NULL DEFAULT 0,
    schema_id    INTEGER NOT NULL,
    body         BLOB    NOT NULL,
    CONSTRAINT log_entries_pkey PRIMARY KEY (load_id, seq),
    CONSTRAINT log_entries_entry_id_key UNIQUE (load_id, entry_id)
);

CREATE TABLE outbox (
    position         INTEGER PRIMARY KEY,  -- insertion (commit) order (rowid: max + 1)
    id               TEXT    NOT NULL CONSTRAINT outbox_pkey UNIQUE,
    load_id          TEXT    NOT NULL,
    load_version     INTEGER NOT NULL,
    destination      TEXT    NOT NULL,
    action           TEXT    NOT NULL,
    status           TEXT    NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'dispatched', 'dead')),
    claim_token      TEXT,
    lease_until      TEXT,
    retry_at         TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    first_attempt_at TEXT,
    last_failure     TEXT,
    receipt          TEXT,
    created_at       TEXT    NOT NULL,
    dispatched_at    TEXT,
    dead_at          TEXT
);
CREATE INDEX outbox_pending_idx ON outbox (position) WHERE status = 'pending';
CREATE INDEX outbox_load_idx ON outbox (load_id, destination, status, load_version, position);
CREATE INDEX outbox_dead_idx ON outbox (dead_at) WHERE status = 'dead';

CREATE TABLE timers (
    timer_id     TEXT    NOT NULL CONSTRAINT timers_pkey PRIMARY KEY,
    load_id      TEXT,
    ask_id       TEXT,
    attempt      INTEGER,
    fire_at      TEXT,
    status       TEXT    NOT NULL CHECK (status IN ('scheduled', 'fired', 'cancelled')),
    fired_at     TEXT,
    cancelled_at TEXT,
    CHECK (status = 'cancelled' OR (load_id IS NOT NULL AND ask_id IS NOT NULL
                                    AND attempt IS NOT NULL AND fire_at IS NOT NULL))
);
CREATE INDEX timers_due_idx ON timers (fire_at, timer_id) WHERE status = 'scheduled';
CREATE INDEX timers_load_idx ON timers (load_id);
