-- 0006: the outbox keeps only its live days; older days are retired (issue 18; migrations/README.md,
-- "Retired outbox days"). Postgres 15 locks every partition a generic plan names before it prunes,
-- and the append's idempotency-key probe and the claim visit every outbox partition: with the
-- seven days of delivered rows retention keeps, the hot path paid for about seventeen partitions.
-- A day whose rows are all delivered (or dead) moves, as a partition, from `outbox` to
-- `outbox_retired` (DETACH + ATTACH: no row is copied), where it waits for retention to drop it.
-- The append, the claim, the marks and the relay's lag see only `outbox`: yesterday, today, the
-- days made ahead and the default partition.

-- The outbox's columns, defaults, CHECK constraints (by name: an attached partition must hold
-- its parent's) and indexes, so that a retired day's indexes are adopted as they are.
CREATE TABLE outbox_retired (LIKE outbox INCLUDING ALL) PARTITION BY RANGE (created_at);

-- Retires the outbox partition of `day` unless one of its rows is pending (returns false, moves
-- nothing; false too for a day retired already). Its dead rows move to `outbox_default`, where
-- the dead-letter views and retention find them; the partition itself is detached from `outbox`
-- and attached to `outbox_retired`. The caller holds the advisory lock that serializes `ensure`
-- across services, so two services never retire one day at once.
--
-- Locks: a CHECK constraint matching the day is added NOT VALID and validated first, under
-- SHARE UPDATE EXCLUSIVE on the partition only (traffic goes on while it reads the day); the
-- attach then trusts it instead of reading the day again. Only then is `outbox` locked (ACCESS
-- EXCLUSIVE, for the detach): the pending check (its partial index), the dead rows and two
-- catalogue changes, a fraction of a second once a day.
CREATE FUNCTION load_agent_retire_outbox_day(day date)
RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    part text := 'outbox' || to_char(day, '"_p"YYYY"_"MM"_"DD');
    bound text := part || '_bound';
    lo text := day::text || ' 00:00:00+00';
    hi text := (day + 1)::text || ' 00:00:00+00';
    pending boolean;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(quote_ident(part))
                                               AND inhparent = 'outbox'::regclass) THEN
        IF EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(quote_ident(part))
                                               AND inhparent = 'outbox_retired'::regclass) THEN
            RETURN false;  -- retired already (another service's run)
        END IF;
        RAISE EXCEPTION 'no partition % of outbox', part USING ERRCODE = 'undefined_table';
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE status = ''pending'')', part) INTO pending;
    IF pending THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = bound
                                                 AND conrelid = to_regclass(quote_ident(part))) THEN
        EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (created_at >= %L AND created_at < %L) NOT VALID',
                       part, bound, lo, hi);
    END IF;
    EXECUTE format('ALTER TABLE %I VALIDATE CONSTRAINT %I', part, bound);
    LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE;
    -- Again under the lock: a dead row put back to pending meanwhile keeps the day live.
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE status = ''pending'')', part) INTO pending;
    IF pending THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TEMP TABLE load_agent_dead ON COMMIT DROP AS
                    WITH gone AS (DELETE FROM %I WHERE status = ''dead'' RETURNING *) SELECT * FROM gone', part);
    EXECUTE format('ALTER TABLE outbox DETACH PARTITION %I', part);
    EXECUTE format('ALTER TABLE outbox_retired ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
    -- The day has no partition in `outbox` any more: these rows go to outbox_default.
    INSERT INTO outbox SELECT * FROM load_agent_dead;
    DROP TABLE load_agent_dead;
    RETURN true;
END
$fn$;

-- Retention's drop of an outbox day (0005), now wherever the day is: still in `outbox` (it held
-- pending rows when the days were retired) or in `outbox_retired`. Same checks and results.
CREATE OR REPLACE FUNCTION load_agent_drop_outbox_day(day date, keep_dead_since timestamptz,
                                                      OUT dropped bigint, OUT kept bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    part text := 'outbox' || to_char(day, '"_p"YYYY"_"MM"_"DD');
    parent text;
    pending bigint;
BEGIN
    SELECT i.inhparent::regclass::text INTO parent FROM pg_inherits i
    WHERE i.inhrelid = to_regclass(quote_ident(part))
      AND i.inhparent IN ('outbox'::regclass, 'outbox_retired'::regclass);
    IF parent IS NULL THEN
        RAISE EXCEPTION 'no partition % of outbox', part USING ERRCODE = 'undefined_table';
    END IF;
    EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', parent);
    EXECUTE format('SELECT count(*) FILTER (WHERE status = ''pending''), count(*) FROM %I', part)
        INTO pending, dropped;
    IF pending > 0 THEN
        RAISE EXCEPTION '% holds % pending rows', part, pending USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    EXECUTE format('CREATE TEMP TABLE load_agent_kept ON COMMIT DROP AS
                    SELECT * FROM %I WHERE status = ''dead'' AND dead_at >= $1', part) USING keep_dead_since;
    EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', parent, part);
    EXECUTE format('DROP TABLE %I', part);
    INSERT INTO outbox SELECT * FROM load_agent_kept;
    GET DIAGNOSTICS kept = ROW_COUNT;
    DROP TABLE load_agent_kept;
    dropped := dropped - kept;
END
$fn$;

-- The partitions made ahead now default to one day and one month (lifecycle.days_ahead,
-- lifecycle.months_ahead): each one made ahead is one more relation every statement's generic plan
-- locks. Empty partitions beyond those horizons (0004 made a week and two months) are dropped;
-- a service configured for more makes them again at its next ensure.
DO $do$
DECLARE
    r record;
    n bigint;
BEGIN
    FOR r IN
        SELECT c.relname::text AS part, i.inhparent::regclass::text AS parent
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid AND c.relkind = 'r'
        WHERE (i.inhparent = 'outbox'::regclass AND c.relname ~ '^outbox_p[0-9]{4}_[0-9]{2}_[0-9]{2}$'
               AND to_date(substr(c.relname, 9), 'YYYY_MM_DD') > current_date + 1)
           OR (i.inhparent IN ('log_entries'::regclass, 'timers'::regclass)
               AND c.relname ~ '_p[0-9]{4}_[0-9]{2}$'
               AND to_date(right(c.relname, 7), 'YYYY_MM') > date_trunc('month', current_date) + interval '1 month')
    LOOP
        EXECUTE format('SELECT count(*) FROM %I', r.part) INTO n;
        IF n = 0 THEN
            EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', r.parent, r.part);
            EXECUTE format('DROP TABLE %I', r.part);
        END IF;
    END LOOP;
END
$do$;
