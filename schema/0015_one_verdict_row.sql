-- One verdict row per completion, and the index entries nothing on the hot path reads
-- (docs/performance.md, "Indexes on the hot tables"). Before this, a completion wrote its verdict
-- twice: a job_results row (the outbox, keyed by job) and a job_outcomes row (the consumer-group
-- stream), four index entries between them, and a claim wrote an entry in jobs_assigned and each
-- event one in job_events_pkey that no statement looks up.
--  * job_results becomes a view of the completed outcomes: the same columns, the same rows (a
--    completed job has exactly one completed outcome, written in its completion's statement), read
--    with the reader's own rights and row security (security_invoker), so every reader keeps its
--    query and no writer has a second row to write.
--  * job_outcomes loses its primary key: its id is an identity that no statement looks up but the
--    sequencer, which reads its rows through job_outcomes_unsequenced (id) WHERE seq IS NULL. Its
--    index by job splits in two: job_outcomes_result, unique, over the completed outcomes (what
--    job_results_pkey was: one result per job, so that a completion of a job that already has a
--    result fails whole instead of publishing a second one), and job_outcomes_ended over the
--    others. A completion writes an entry in the first only.
--  * job_events loses its primary key (id, at): ids come from an identity, the table is
--    append-only, and every reader goes by job (job_events_job) or reads a whole range.
--  * jobs_assigned (id) WHERE assigned goes: the reaper and the console's lease list read the
--    assigned rows through jobs_assigned_queue (org_id, queue) WHERE assigned, the same rows.
-- A claim now writes three index entries (jobs_pkey, jobs_assigned_queue, job_events_job) and a
-- completion five (jobs_pkey, jobs_finished, job_events_job, job_outcomes_result,
-- job_outcomes_unsequenced), against five and eight before, and one row fewer.

-- A result written before job_outcomes existed (schema 0008) has no outcome: it gets one, so that
-- the view keeps it. Consumer groups of its organization see it once, at their next fetch.
INSERT INTO job_outcomes (org_id, job_id, outcome, queue, generation, attempts, result_ref, at)
SELECT r.org_id, r.job_id, 'completed', coalesce(j.queue, 'default'), r.generation,
       coalesce(j.attempts, 1), r.result_ref, r.published_at
  FROM job_results r LEFT JOIN jobs j ON j.id = r.job_id
 WHERE NOT EXISTS (SELECT 1 FROM job_outcomes o
                    WHERE o.job_id = r.job_id AND o.outcome = 'completed')
 ORDER BY r.job_id;

DROP TABLE job_results;
CREATE VIEW job_results WITH (security_invoker = true) AS
SELECT job_id, org_id, generation, result_ref, at AS published_at
  FROM job_outcomes WHERE outcome = 'completed';
COMMENT ON VIEW job_results IS
    'The completed outcomes: one row per completed job, its generation and result reference.';
GRANT SELECT ON job_results TO aclaim_coordinator, aclaim_producer;

ALTER TABLE job_outcomes DROP CONSTRAINT job_outcomes_pkey;
DROP INDEX job_outcomes_job;
CREATE UNIQUE INDEX job_outcomes_result ON job_outcomes (job_id) WHERE outcome = 'completed';
CREATE INDEX job_outcomes_ended ON job_outcomes (job_id) WHERE outcome <> 'completed';

-- As in 0013 and 0008, over the two indexes by job.
CREATE OR REPLACE FUNCTION jobs_forget_outcomes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_outcomes o
     WHERE o.job_id IN (SELECT g.id FROM gone g) AND o.outcome = 'completed';
    DELETE FROM job_outcomes o
     WHERE o.job_id IN (SELECT g.id FROM gone g) AND o.outcome <> 'completed';
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION aclaim_outcome_unacknowledged(job bigint) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN EXISTS (SELECT 1 FROM job_outcomes o JOIN result_groups g ON g.org_id = o.org_id
                    WHERE o.job_id = job AND o.outcome = 'completed'
                      AND (o.seq IS NULL OR o.seq > g.acked))
        OR EXISTS (SELECT 1 FROM job_outcomes o JOIN result_groups g ON g.org_id = o.org_id
                    WHERE o.job_id = job AND o.outcome <> 'completed'
                      AND (o.seq IS NULL OR o.seq > g.acked));
ALTER TABLE job_events DROP CONSTRAINT job_events_pkey;
DROP INDEX jobs_assigned;

-- As in 0008, with the update finding its rows through job_outcomes_unsequenced, now that the
-- primary key is gone.
CREATE OR REPLACE FUNCTION aclaim_results_sequence(max_rows integer DEFAULT 10000) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET lock_timeout = '1s' AS $$
DECLARE
    given integer;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM job_outcomes WHERE seq IS NULL) THEN
        RETURN 0;
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'outcomes are given positions in READ COMMITTED transactions only '
                        '(this one is %)', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    BEGIN
        PERFORM pg_advisory_xact_lock(hashtextextended('aclaim results sequencer', 0));
    EXCEPTION WHEN lock_not_available THEN
        RETURN 0;  -- another sequencer holds it; what it commits is read at the next fetch
    END;
    WITH todo AS MATERIALIZED (
        SELECT s.id, s.org_id,
               row_number() OVER (PARTITION BY s.org_id ORDER BY s.id) AS k,
               count(*) OVER (PARTITION BY s.org_id) AS n
          FROM (SELECT id, org_id FROM job_outcomes WHERE seq IS NULL
                 ORDER BY id LIMIT max_rows) AS s
    ), heads AS (
        INSERT INTO result_heads AS h (org_id, last_seq)
        SELECT org_id, max(n) FROM todo GROUP BY org_id
        ON CONFLICT (org_id) DO UPDATE SET last_seq = h.last_seq + EXCLUDED.last_seq
        RETURNING h.org_id, h.last_seq
    )
    UPDATE job_outcomes o SET seq = heads.last_seq - todo.n + todo.k
      FROM todo JOIN heads USING (org_id)
     WHERE o.id = todo.id AND o.seq IS NULL;
    GET DIAGNOSTICS given = ROW_COUNT;
    RETURN given;
END $$;

-- As in 0007, counting a pruned job's result from its completed outcome, which the statement's
-- jobs_forget_outcomes trigger (0013) removes with the job's other outcomes.
CREATE OR REPLACE FUNCTION aclaim_prune_jobs(now_us bigint, batch integer)
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
        DELETE FROM jobs j WHERE j.id = ANY (ARRAY(SELECT id FROM doomed))
        RETURNING j.id, j.org_id, j.state
    ), unpublished AS (
        SELECT o.job_id, o.org_id FROM job_outcomes o
         WHERE o.job_id = ANY (ARRAY(SELECT id FROM gone)) AND o.outcome = 'completed'
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
