-- 0005: retention drops whole partitions (issue 18; docs/operations.md, "Retention"). Each
-- function checks, under lock and in the caller's transaction, that what it drops may go, and
-- raises (dropping nothing) when it may not.
--
-- Locks. DETACH PARTITION takes ACCESS EXCLUSIVE on the parent (DETACH ... CONCURRENTLY is not
-- allowed beside a default partition), held to the commit. The outbox and the timers take it
-- first, so no session can hold the parent and wait for the partition (no deadlock); their
-- checks are small (the pending/scheduled rows through their partial indexes, and a count), so
-- the relay and the pump wait a fraction of a second once a day. The log's check reads a whole
-- month, so it holds only SHARE on that month's partition (no append writes a month that old)
-- and takes the parent's lock last, for the detach.

-- Drops the log partition of `month` after checking that it holds exactly the loads and versions
-- an archive verified (`loads`, `versions`: each load's last seq in the archive), and that no row
-- of that month waits in the default partition. Also removes those loads' directory and
-- load_summary rows. Returns the number of log rows dropped.
CREATE FUNCTION load_agent_drop_log_month(month date, loads text[], versions bigint[])
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    part text := 'log_entries' || to_char(month, '"_p"YYYY"_"MM');
    mismatch text;
    stray bigint;
    dropped bigint;
BEGIN
    IF to_regclass(quote_ident(part)) IS NULL THEN
        RAISE EXCEPTION 'no partition % of log_entries', part USING ERRCODE = 'undefined_table';
    END IF;
    -- No append can write into the month while it is compared, detached and dropped.
    EXECUTE format('LOCK TABLE %I IN SHARE MODE', part);
    SELECT count(*) INTO stray FROM log_entries_default WHERE load_month = month;
    IF stray > 0 THEN
        RAISE EXCEPTION '% rows of % wait in log_entries_default: run load-agent partitions ensure first', stray, part
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    EXECUTE format(
        'WITH here AS (SELECT load_id, max(seq) AS v FROM %I GROUP BY load_id),
              arch AS (SELECT * FROM unnest($1::text[], $2::int8[]) AS a(load_id, v))
         SELECT coalesce(h.load_id, a.load_id) || '': the store has '' || coalesce(h.v::text, ''no log'')
                || '', the archive '' || coalesce(a.v::text, ''nothing'')
         FROM here h FULL JOIN arch a ON a.load_id = h.load_id
         WHERE h.v IS DISTINCT FROM a.v LIMIT 1', part)
        INTO mismatch USING loads, versions;
    IF mismatch IS NOT NULL THEN
        RAISE EXCEPTION 'log partition % is not what the archive holds (load %)', part, mismatch
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    EXECUTE format('SELECT count(*) FROM %I', part) INTO dropped;
    DELETE FROM load_summary s USING load_months m WHERE m.load_id = s.load_id AND m.load_month = month;
    DELETE FROM load_months WHERE load_month = month;
    EXECUTE format('ALTER TABLE log_entries DETACH PARTITION %I', part);
    EXECUTE format('DROP TABLE %I', part);
    RETURN dropped;
END
$fn$;

-- Drops the outbox partition of `day` when none of its rows is pending; its dead rows that died
-- at or after `keep_dead_since` are moved into the default partition (kept for their window).
-- Returns the rows dropped and the dead rows kept.
CREATE FUNCTION load_agent_drop_outbox_day(day date, keep_dead_since timestamptz,
                                           OUT dropped bigint, OUT kept bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    part text := 'outbox' || to_char(day, '"_p"YYYY"_"MM"_"DD');
    pending bigint;
BEGIN
    IF to_regclass(quote_ident(part)) IS NULL THEN
        RAISE EXCEPTION 'no partition % of outbox', part USING ERRCODE = 'undefined_table';
    END IF;
    LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE;
    EXECUTE format('SELECT count(*) FILTER (WHERE status = ''pending''), count(*) FROM %I', part)
        INTO pending, dropped;
    IF pending > 0 THEN
        RAISE EXCEPTION '% holds % pending rows', part, pending USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    EXECUTE format('CREATE TEMP TABLE load_agent_kept ON COMMIT DROP AS
                    SELECT * FROM %I WHERE status = ''dead'' AND dead_at >= $1', part) USING keep_dead_since;
    EXECUTE format('ALTER TABLE outbox DETACH PARTITION %I', part);
    EXECUTE format('DROP TABLE %I', part);
    -- The day has no partition any more: these rows go to outbox_default.
    INSERT INTO outbox SELECT * FROM load_agent_kept;
    GET DIAGNOSTICS kept = ROW_COUNT;
    DROP TABLE load_agent_kept;
    dropped := dropped - kept;
END
$fn$;

-- Drops the timers partition of `month` when none of its timers is still scheduled. Returns the
-- rows dropped.
CREATE FUNCTION load_agent_drop_timer_month(month date)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    part text := 'timers' || to_char(month, '"_p"YYYY"_"MM');
    scheduled bigint;
    dropped bigint;
BEGIN
    IF to_regclass(quote_ident(part)) IS NULL THEN
        RAISE EXCEPTION 'no partition % of timers', part USING ERRCODE = 'undefined_table';
    END IF;
    LOCK TABLE timers IN ACCESS EXCLUSIVE MODE;
    EXECUTE format('SELECT count(*) FILTER (WHERE status = ''scheduled''), count(*) FROM %I', part)
        INTO scheduled, dropped;
    IF scheduled > 0 THEN
        RAISE EXCEPTION '% holds % scheduled timers', part, scheduled USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    EXECUTE format('ALTER TABLE timers DETACH PARTITION %I', part);
    EXECUTE format('DROP TABLE %I', part);
    RETURN dropped;
END
$fn$;
