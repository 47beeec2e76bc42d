-- Creates the monthly partitions of job_events from the month of now_us through `months_ahead`
-- months after it that do not exist yet (a month the legacy partition already covers is skipped),
-- and registers them (a partition's name is its month, job_events_YYYY_MM); returns the names it created. Each is created empty and then attached,
-- which takes SHARE UPDATE EXCLUSIVE on job_events: inserts (every claim's event) go on meanwhile,
-- where CREATE TABLE .. PARTITION OF would take ACCESS EXCLUSIVE and stop them. Never waits more
-- than lock_timeout for that lock. The coordinators' retention pass calls it, so partitions exist
-- months before they are needed; there is no default partition, whose presence would forbid
-- DETACH ... CONCURRENTLY.
CREATE OR REPLACE FUNCTION aclaim_ensure_event_partitions(now_us bigint, months_ahead integer)
    RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '2s' AS $$
DECLARE
    first timestamptz := date_trunc('month', aclaim_ts(now_us), 'UTC');
    lo timestamptz;
    hi timestamptz;
    part text;
BEGIN
    FOR m IN 0 .. greatest(months_ahead, 0) LOOP
        lo := first + make_interval(months => m);
        hi := lo + interval '1 month';
        -- A month that has (or had: archived and dropped) a partition is not made again: an
        -- event stamped in an archived month comes from a clock months behind, and fails.
        CONTINUE WHEN EXISTS (SELECT 1 FROM job_event_partitions p
                               WHERE coalesce(p.from_at, '-infinity') < hi AND p.to_at > lo);
        part := 'job_events_' || to_char(lo AT TIME ZONE 'UTC', 'YYYY_MM');
        EXECUTE format('CREATE TABLE %I (LIKE job_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                       part);
        EXECUTE format('ALTER TABLE job_events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                       part, lo, hi);
        INSERT INTO job_event_partitions (name, from_at, to_at, created_at)
        VALUES (part, lo, hi, aclaim_ts(now_us));
        RETURN NEXT part;
    END LOOP;
END $$;

REVOKE ALL ON FUNCTION aclaim_ensure_event_partitions(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_ensure_event_partitions(bigint, integer) TO aclaim_coordinator;
