-- Retention: finished jobs are kept for a period per terminal state and queue, then removed with
-- their results in bounded batches (aclaim_prune_jobs), each batch recorded in job_prunes so that
-- the checker and recovery can tell a pruned job from a lost one; job_events becomes a table
-- partitioned by month on `at`, whose old partitions are detached, archived and dropped by
-- `aclaimctl retention archive` instead of being deleted row by row.
--
-- Applied in place on a populated database: the existing job_events table becomes the partition
-- job_events_legacy, covering everything before the first month after its latest event, and
-- keeps its rows, ids and indexes. Attaching it checks its rows against that bound (one scan) and
-- builds the partitioned primary key (id, at) on it: on a large installation, apply this
-- migration in a quiet moment.

-- ---- per-queue retention ----
-- How long a finished job of the queue is kept, per terminal state, from its completed_at
-- (microseconds; NULL: the built-in default of aclaim_retention_us; kForever = 2^63-1: never).
ALTER TABLE job_queues
    ADD COLUMN retain_completed_us bigint CHECK (retain_completed_us > 0),
    ADD COLUMN retain_failed_us    bigint CHECK (retain_failed_us > 0),
    ADD COLUMN retain_discarded_us bigint CHECK (retain_discarded_us > 0),
    ADD COLUMN retain_cancelled_us bigint CHECK (retain_cancelled_us > 0);

-- The retention in force for finished jobs of one state in one queue: the queue's setting, or the
-- built-in default (completed and cancelled 7 days; failed and discarded, which wait for a
-- person, 30 days). Read under the caller's row-level security.
CREATE FUNCTION aclaim_retention_us(org bigint, queue_name text, job_state text) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN coalesce(
        (SELECT CASE job_state WHEN 'completed' THEN q.retain_completed_us
                               WHEN 'failed' THEN q.retain_failed_us
                               WHEN 'discarded' THEN q.retain_discarded_us
                               WHEN 'cancelled' THEN q.retain_cancelled_us END
           FROM job_queues q WHERE q.org_id = org AND q.queue = queue_name),
        CASE job_state WHEN 'completed' THEN 604800000000
                       WHEN 'cancelled' THEN 604800000000
                       WHEN 'failed' THEN 2592000000000
                       WHEN 'discarded' THEN 2592000000000 END);

-- THE decision whether a job may be removed, in one place: every path that removes a job row
-- (aclaim_prune_jobs, and the preview of `aclaimctl retention run --dry-run`) asks this predicate
-- on the current row version. A job may go when it is finished (completed, failed, discarded or
-- cancelled: never a quarantined one, whose row and history wait for a person) and its retention
-- has passed since it finished. A rule that holds a finished job longer (for example: a result
-- no consumer group has acknowledged yet) belongs here, as one more AND.
-- The age is compared as a difference so that a retention of "forever" (2^63-1) cannot overflow.
CREATE FUNCTION aclaim_job_prunable(j jobs, now_us bigint) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN j.state IN ('completed', 'failed', 'discarded', 'cancelled')
       AND j.completed_at IS NOT NULL
       AND now_us - aclaim_us(j.completed_at) > aclaim_retention_us(j.org_id, j.queue, j.state);

-- The pruner's path to its candidates: finished rows by organization, queue and state, oldest
-- first. A skip scan over its leading columns finds the (organization, queue, state) groups, and
-- each group is one range scan up to its own cut-off, so rows a longer retention keeps are never
-- read again batch after batch. Written once per finished job (claims and completions already
-- update the partial indexes that depend on state; renewals stay HOT).
CREATE INDEX jobs_finished ON jobs (org_id, queue, state, completed_at)
    WHERE state IN ('completed', 'failed', 'discarded', 'cancelled');

-- ---- the prune ledger ----
-- One row per organization per prune batch: which job ids were removed (exactly: a multirange
-- of the deleted ids) and how many of each state, with their results. Append-only, as job_events:
-- it is what lets `aclaimctl check` and recovery tell a job pruned by retention (absent) from a
-- job that was lost.
CREATE TABLE job_prunes (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id    bigint          NOT NULL,
    pruned_at timestamptz     NOT NULL,
    jobs      int8multirange  NOT NULL,
    completed integer         NOT NULL DEFAULT 0,
    failed    integer         NOT NULL DEFAULT 0,
    discarded integer         NOT NULL DEFAULT 0,
    cancelled integer         NOT NULL DEFAULT 0,
    results   integer         NOT NULL DEFAULT 0
);
CREATE INDEX job_prunes_org ON job_prunes (org_id, id);
CREATE TRIGGER job_prunes_no_update BEFORE UPDATE OR DELETE ON job_prunes
    FOR EACH ROW EXECUTE FUNCTION job_events_append_only();
ALTER TABLE job_prunes ENABLE ROW LEVEL SECURITY;
CREATE POLICY org_scope ON job_prunes TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
GRANT SELECT ON job_prunes TO aclaim_coordinator;

-- One prune batch: removes at most `batch` prunable jobs (aclaim_job_prunable), oldest first in
-- each (organization, queue, state) group, with their job_results rows, and records them in
-- job_prunes; returns one row per organization touched. Candidates are locked FOR UPDATE SKIP
-- LOCKED with the predicate, which a locking read rechecks on the newest row version: a job an
-- operator is reviving at that moment is passed over, never removed from under it. It takes no
-- advisory lock and touches no pending row, so no claim ever waits for it (tests/pg/
-- retention_tests.cpp holds a batch open and claims meanwhile). Its events stay: job_events is
-- append-only and loses history only by whole partitions.
-- SECURITY DEFINER: the coordinator's role may not delete jobs or results by itself, only through
-- this function and its predicate.
CREATE FUNCTION aclaim_prune_jobs(now_us bigint, batch integer)
    RETURNS TABLE (org_id bigint, completed integer, failed integer, discarded integer,
                   cancelled integer, results integer)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE grp AS (
        (SELECT j.org_id, j.queue, j.state FROM jobs j
          WHERE j.state IN ('completed', 'failed', 'discarded', 'cancelled')
          ORDER BY j.org_id, j.queue, j.state LIMIT 1)
        UNION ALL
        SELECT n.org_id, n.queue, n.state FROM grp g CROSS JOIN LATERAL (
            SELECT j.org_id, j.queue, j.state FROM jobs j
             WHERE j.state IN ('completed', 'failed', 'discarded', 'cancelled')
               AND (j.org_id, j.queue, j.state) > (g.org_id, g.queue, g.state)
             ORDER BY j.org_id, j.queue, j.state LIMIT 1) n
    ), cut AS MATERIALIZED (
        -- Materialized: each group's cut-off is one value, so that its scan below is a range of
        -- jobs_finished rather than a filter evaluated row by row.
        SELECT g.org_id, g.queue, g.state, aclaim_retention_us(g.org_id, g.queue, g.state) AS keep
          FROM grp g
    ), candidates AS (
        SELECT c.id FROM cut CROSS JOIN LATERAL (
            SELECT j.id FROM jobs j
             WHERE j.org_id = cut.org_id AND j.queue = cut.queue AND j.state = cut.state
               AND j.state IN ('completed', 'failed', 'discarded', 'cancelled')
               AND j.completed_at < aclaim_ts(now_us - cut.keep)
             ORDER BY j.completed_at LIMIT batch) c
         WHERE cut.keep < now_us
         LIMIT batch
    ), doomed AS MATERIALIZED (
        SELECT j.id FROM jobs j
         WHERE j.id IN (SELECT id FROM candidates) AND aclaim_job_prunable(j, now_us)
         FOR UPDATE SKIP LOCKED
    ), gone AS (
        -- By primary key, whatever the planner estimates of the batch.
        DELETE FROM jobs j WHERE j.id = ANY (ARRAY(SELECT id FROM doomed))
        RETURNING j.id, j.org_id, j.state
    ), unpublished AS (
        DELETE FROM job_results r WHERE r.job_id = ANY (ARRAY(SELECT id FROM gone))
        RETURNING r.job_id, r.org_id
    ), logged AS (
        INSERT INTO job_prunes AS p (org_id, pruned_at, jobs, completed, failed, discarded,
                                     cancelled, results)
        SELECT gone.org_id, aclaim_ts(now_us), range_agg(int8range(gone.id, gone.id + 1)),
               count(*) FILTER (WHERE gone.state = 'completed'),
               count(*) FILTER (WHERE gone.state = 'failed'),
               count(*) FILTER (WHERE gone.state = 'discarded'),
               count(*) FILTER (WHERE gone.state = 'cancelled'),
               (SELECT count(*) FROM unpublished u WHERE u.org_id = gone.org_id)
          FROM gone GROUP BY gone.org_id
        RETURNING p.org_id, p.completed, p.failed, p.discarded, p.cancelled, p.results
    )
    SELECT l.org_id, l.completed, l.failed, l.discarded, l.cancelled, l.results
      FROM logged l ORDER BY l.org_id;
END $$;
REVOKE EXECUTE ON FUNCTION aclaim_prune_jobs(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_prune_jobs(bigint, integer) TO aclaim_coordinator;

-- ---- job_events, partitioned by month on `at` ----
-- Every partition the retention tools know, and what became of it: attached (part of job_events),
-- detaching (DETACH ... CONCURRENTLY began), archived (detached and written to archive_file,
-- whose rows and SHA-256 are recorded) and dropped. from_at NULL is the open lower bound of the
-- legacy partition.
CREATE TABLE job_event_partitions (
    name         text        PRIMARY KEY,
    from_at      timestamptz,
    to_at        timestamptz NOT NULL,
    state        text        NOT NULL DEFAULT 'attached'
                 CHECK (state IN ('attached', 'detaching', 'archived', 'dropped')),
    created_at   timestamptz NOT NULL,
    archived_at  timestamptz,
    archive_file text,
    rows         bigint,
    min_id       bigint,
    max_id       bigint,
    sha256       text,
    CHECK (from_at IS NULL OR from_at < to_at),
    CHECK (state IN ('attached', 'detaching') OR (archived_at IS NOT NULL AND rows IS NOT NULL))
);
GRANT SELECT ON job_event_partitions TO aclaim_coordinator;

DO $$
DECLARE
    next_id bigint;
    bound timestamptz;
BEGIN
    -- The identity's position, so that ids keep increasing across the conversion.
    SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END INTO next_id
      FROM job_events_id_seq;
    next_id := greatest(next_id, (SELECT coalesce(max(id), 0) + 1 FROM job_events));
    SELECT date_trunc('month', max(at), 'UTC') + interval '1 month' INTO bound FROM job_events;

    ALTER TABLE job_events RENAME TO job_events_legacy;
    ALTER TABLE job_events_legacy ALTER COLUMN id DROP IDENTITY;
    ALTER TABLE job_events_legacy DROP CONSTRAINT job_events_pkey;
    ALTER INDEX job_events_job RENAME TO job_events_legacy_job;
    ALTER INDEX job_events_rejected RENAME TO job_events_legacy_rejected;
    -- The parent's trigger is cloned onto every partition, this one included.
    DROP TRIGGER job_events_no_update ON job_events_legacy;
    DROP POLICY org_scope ON job_events_legacy;
    ALTER TABLE job_events_legacy DISABLE ROW LEVEL SECURITY;
    REVOKE ALL ON job_events_legacy FROM aclaim_coordinator;

    EXECUTE format('CREATE SEQUENCE job_events_id_seq AS bigint START WITH %s', next_id);
    CREATE TABLE job_events (
        id         bigint      NOT NULL DEFAULT nextval('job_events_id_seq'),
        job_id     bigint      NOT NULL,
        org_id     bigint      NOT NULL,
        generation bigint      NOT NULL,
        kind       text        NOT NULL CONSTRAINT job_events_kind_check CHECK (kind IN (
            'enqueued', 'claimed', 'renewed', 'completed', 'failed', 'released', 'reclaimed',
            'rejected', 'quarantined', 'unquarantined', 'due', 'discarded', 'cancelled',
            'retried')),
        worker     text,
        at         timestamptz NOT NULL,
        detail     text        NOT NULL DEFAULT '',
        PRIMARY KEY (id, at)
    ) PARTITION BY RANGE (at);
    ALTER SEQUENCE job_events_id_seq OWNED BY job_events.id;
    -- Same definitions as before: attaching the legacy table adopts its indexes, building none.
    CREATE INDEX job_events_job ON job_events (job_id, id);
    CREATE INDEX job_events_rejected ON job_events (at) INCLUDE (org_id) WHERE kind = 'rejected';
    -- The log is append-only, on every attached partition (a row trigger on a partitioned table
    -- is cloned onto each partition, present and future).
    CREATE TRIGGER job_events_no_update BEFORE UPDATE OR DELETE ON job_events
        FOR EACH ROW EXECUTE FUNCTION job_events_append_only();
    ALTER TABLE job_events ENABLE ROW LEVEL SECURITY;
    CREATE POLICY org_scope ON job_events TO aclaim_coordinator
        USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
    GRANT SELECT, INSERT ON job_events TO aclaim_coordinator;
    GRANT USAGE ON SEQUENCE job_events_id_seq TO aclaim_coordinator;

    -- Everything before the first month after the latest event stays where it is, in one
    -- partition with an open lower bound; an empty installation gets an empty one before the
    -- current month, so that no past instant is ever without a partition.
    bound := coalesce(bound, date_trunc('month', now(), 'UTC'));
    EXECUTE format('ALTER TABLE job_events ATTACH PARTITION job_events_legacy '
                   'FOR VALUES FROM (MINVALUE) TO (%L)', bound);
    INSERT INTO job_event_partitions (name, from_at, to_at, created_at)
    VALUES ('job_events_legacy', NULL, bound, now());
END $$;

-- Creates the monthly partitions of job_events from the month of now_us through `months_ahead`
-- months after it that do not exist yet (a month the legacy partition already covers is skipped),
-- and registers them (a partition's name is its month, job_events_YYYY_MM); returns the names it created. Each is created empty and then attached,
-- which takes SHARE UPDATE EXCLUSIVE on job_events: inserts (every claim's event) go on meanwhile,
-- where CREATE TABLE .. PARTITION OF would take ACCESS EXCLUSIVE and stop them. Never waits more
-- than lock_timeout for that lock. The coordinators' retention pass calls it, so partitions exist
-- months before they are needed; there is no default partition, whose presence would forbid
-- DETACH ... CONCURRENTLY.
CREATE FUNCTION aclaim_ensure_event_partitions(now_us bigint, months_ahead integer)
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
REVOKE EXECUTE ON FUNCTION aclaim_ensure_event_partitions(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_ensure_event_partitions(bigint, integer) TO aclaim_coordinator;

-- At migration time (the real clock: this runs once), partitions for this month and the next three,
-- so that a fresh installation has them before its first coordinator starts.
SELECT aclaim_ensure_event_partitions(aclaim_us(now()), 3);
