-- 0008: the store's id columns compare bytewise (`COLLATE "C"`; issue 15, migrations/README.md
-- "Ids compare bytewise"). Every append, claim and mark walks b-trees keyed by text ids
-- (`load_id`, `entry_id`, the idempotency key): under the database's collation each comparison
-- of two ids is a locale comparison (`strcoll`, after copying both into terminated buffers),
-- under "C" it is `memcmp`. Equality is unchanged (a deterministic collation tests equality
-- bytewise either way); only the order of ids changes, in indexes and in `ORDER BY load_id`
-- listings, to byte order.
--
-- Cost of the migration: the column's type is unchanged, so no table is rewritten, but every
-- index holding one of these columns is rebuilt, under ACCESS EXCLUSIVE on its table, in this
-- migration's transaction: on a large store, run it in a maintenance window (docs/operations.md,
-- "Upgrading").
--
-- `outbox` and `outbox_retired` change together: a day moves from one to the other by DETACH +
-- ATTACH, which requires the same collation on both. Partitions made later copy their parent's
-- columns (`CREATE TABLE ... (LIKE parent)`), collation included.
ALTER TABLE load_months ALTER COLUMN load_id TYPE text COLLATE "C";
ALTER TABLE log_entries
    ALTER COLUMN load_id TYPE text COLLATE "C",
    ALTER COLUMN entry_id TYPE text COLLATE "C";
ALTER TABLE outbox
    ALTER COLUMN id TYPE text COLLATE "C",
    ALTER COLUMN load_id TYPE text COLLATE "C",
    ALTER COLUMN destination TYPE text COLLATE "C";
ALTER TABLE outbox_retired
    ALTER COLUMN id TYPE text COLLATE "C",
    ALTER COLUMN load_id TYPE text COLLATE "C",
    ALTER COLUMN destination TYPE text COLLATE "C";
ALTER TABLE timers
    ALTER COLUMN timer_id TYPE text COLLATE "C",
    ALTER COLUMN load_id TYPE text COLLATE "C";
ALTER TABLE load_summary ALTER COLUMN load_id TYPE text COLLATE "C";
