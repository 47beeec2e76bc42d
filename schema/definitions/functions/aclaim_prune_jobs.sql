-- One prune batch: removes at most `batch` prunable jobs (aclaim_job_prunable), oldest first in
-- each (organization, queue, state) group, and records them in job_prunes; returns one row per
-- organization touched, a pruned job's result counted from its completed outcome (which the
-- statement's jobs_forget_outcomes trigger removes with the job's other outcomes). Candidates are
-- locked FOR UPDATE SKIP LOCKED with the predicate, which a locking read rechecks on the newest
-- row version: a job an operator is reviving at that moment is passed over, never removed from
-- under it. It takes no advisory lock and touches no pending row, so no claim ever waits for it
-- (tests/pg/retention_tests.cpp holds a batch open and claims meanwhile). Its events stay:
-- job_events is append-only and loses history only by whole partitions.
-- SECURITY DEFINER: the coordinator's role may not delete jobs or results by itself, only through
-- this function and its predicate.
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

REVOKE ALL ON FUNCTION aclaim_prune_jobs(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_prune_jobs(bigint, integer) TO aclaim_coordinator;
