-- What the operations console lists loads by (crates/store/src/attention.rs): one row per
-- load, written by the worker in the append transaction (a later version replaces an earlier
-- one). Logs written before this table existed get their rows from `load-agent console rebuild`.
CREATE TABLE load_summary (
    load_id         text        PRIMARY KEY,
    client          text,
    stage           text        NOT NULL,
    version         bigint      NOT NULL,
    open_asks       integer     NOT NULL,
    escalated_asks  integer     NOT NULL,
    escalated_since timestamptz,
    urgent_task_at  timestamptz,
    updated_at      timestamptz NOT NULL
);
-- The attention list's candidates, each through a small index: loads with an escalated ask,
-- loads with a recent urgent Hero task (a range on the time); loads with a recent dead action
-- come through outbox_dead_idx and overdue timers through timers_due_idx.
CREATE INDEX load_summary_escalated_idx ON load_summary (load_id) WHERE escalated_asks > 0;
CREATE INDEX load_summary_urgent_idx ON load_summary (urgent_task_at) WHERE urgent_task_at IS NOT NULL;
-- A candidate's dead rows, counted per load (the candidates themselves come through 0001's
-- outbox_dead_idx (dead_at)).
CREATE INDEX outbox_dead_load_idx ON outbox (load_id, dead_at) WHERE status = 'dead';
