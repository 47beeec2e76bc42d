-- Retention (0007) and consumer groups (0008) together. A finished job stays while a consumer
-- group of its organization has not acknowledged its outcome (an outcome not yet given a position
-- counts as unacknowledged): a verdict is never removed before every group took it. An
-- organization with no consumer group keeps nothing for one: its jobs follow their queue's
-- retention alone.
CREATE OR REPLACE FUNCTION aclaim_job_prunable(j jobs, now_us bigint) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN j.state IN ('completed', 'failed', 'discarded', 'cancelled')
       AND j.completed_at IS NOT NULL
       AND now_us - aclaim_us(j.completed_at) > aclaim_retention_us(j.org_id, j.queue, j.state)
       AND NOT aclaim_outcome_unacknowledged(j.id);

-- A job that is removed takes its outcomes with it, so that job_outcomes does not grow with every
-- job ever run: once per statement, over the removed rows (a transition table), which is one
-- index probe per job for a prune batch (aclaim_prune_jobs is the only statement that removes
-- jobs) and costs the other statements on jobs nothing.
CREATE FUNCTION jobs_forget_outcomes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_outcomes o WHERE o.job_id IN (SELECT g.id FROM gone g);
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_forget_outcomes AFTER DELETE ON jobs REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_forget_outcomes();
