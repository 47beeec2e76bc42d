-- Before the enqueue: the queues of `queues` that jobs with exclusions go into and that do not
-- have the flag yet get it, under the organization's queue lock taken exclusive first (before any
-- row of the call is locked, so that no claim holding the lock shared waits on a row of ours),
-- and the epoch moves on.
CREATE OR REPLACE FUNCTION aclaim_flag_exclusions(org bigint, now_us bigint, queues text[], excl_n integer[])
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    flip text[];
BEGIN
    SELECT array_agg(DISTINCT q.queue ORDER BY q.queue) INTO flip
      FROM (SELECT coalesce(queues[n], 'default') AS queue FROM unnest(excl_n) AS n
             WHERE n BETWEEN 1 AND cardinality(queues)) AS q
     WHERE NOT EXISTS (SELECT 1 FROM job_queues jq
                        WHERE jq.org_id = org AND jq.queue = q.queue AND jq.has_exclusions);
    IF flip IS NULL THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(aclaim_org_lock(org));
    PERFORM nextval('aclaim_exclusions_epoch');
    INSERT INTO job_queues (org_id, queue, updated_at, has_exclusions)
    SELECT org, f, aclaim_ts(now_us), true FROM unnest(flip) AS f
    ON CONFLICT (org_id, queue) DO UPDATE SET has_exclusions = true;
END $$;
