-- The retention in force for finished jobs of one state in one queue: the queue's setting, or the
-- built-in default (completed and cancelled 7 days; failed and discarded, which wait for a
-- person, 30 days). Read under the caller's row-level security.
CREATE OR REPLACE FUNCTION aclaim_retention_us(org bigint, queue_name text, job_state text) RETURNS bigint
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
