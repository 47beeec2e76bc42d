-- Retention and consumer groups together. A finished job stays while a consumer
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
