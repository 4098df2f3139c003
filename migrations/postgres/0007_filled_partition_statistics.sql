-- 0007: statistics for partitions that were analyzed while empty (issue 18; migrations/README.md,
-- "Statistics of new partitions"). The store's connections plan their statements once,
-- generically, for every partition; a generic plan made while a partition's statistics say it is
-- empty (`reltuples = 0`: an `ANALYZE` or `VACUUM` of the whole database or of a parent reached
-- the partition made ahead before any row did) reads that partition by a sequential scan, and goes
-- on doing so once the partition becomes the current day or month and fills, until something
-- analyzes it again. A partition never analyzed (`reltuples = -1`) is planned as ten pages and
-- read through its indexes; only the "analyzed empty" state is the trap.

-- Analyzes each partition of the log, the live outbox and the timers whose statistics say empty
-- while rows were written to it since (`pg_stat_get_mod_since_analyze`, so a partition emptied
-- again is not analyzed at every run); returns the partitions analyzed. The `ANALYZE` updates
-- `pg_class`, which makes every session's cached plans that name the partition plan again.
CREATE FUNCTION load_agent_analyze_filled_partitions()
RETURNS SETOF text LANGUAGE plpgsql AS $fn$
DECLARE
    part record;
BEGIN
    FOR part IN
        SELECT c.oid::regclass AS rel, c.relname::text AS name
        FROM pg_inherits i
        JOIN pg_class c ON c.oid = i.inhrelid AND c.relkind = 'r'
        WHERE i.inhparent IN ('log_entries'::regclass, 'outbox'::regclass, 'timers'::regclass)
          AND c.reltuples = 0
          AND pg_stat_get_mod_since_analyze(c.oid) > 0
        ORDER BY c.relname
    LOOP
        EXECUTE format('ANALYZE %s', part.rel);
        RETURN NEXT part.name;
    END LOOP;
END
$fn$;
