CREATE OR REPLACE FUNCTION aclaim_outcome_unacknowledged(job bigint) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN EXISTS (SELECT 1 FROM job_outcomes o JOIN result_groups g ON g.org_id = o.org_id
                    WHERE o.job_id = job AND o.outcome = 'completed'
                      AND (o.seq IS NULL OR o.seq > g.acked))
        OR EXISTS (SELECT 1 FROM job_outcomes o JOIN result_groups g ON g.org_id = o.org_id
                    WHERE o.job_id = job AND o.outcome <> 'completed'
                      AND (o.seq IS NULL OR o.seq > g.acked));
