-- The aging pass of every organization runs as the owner (the coordinator's role may update jobs
-- of the organization in scope only). Per aged queue, with top the highest priority of its
-- organization's pending jobs and bottom the least of aging_bottom and the lowest (two probes of
-- jobs_claim_order):
--  * caught up: for each step k in 1..(top - bottom), the jobs whose k-th boundary fell in
--    (done, upto], upto at most 60 s past done, one range of jobs_org_state each; a job is read
--    once per step it takes, and a job already at the cap is not read at all;
--  * not caught up (aging just set or changed, or the cap rose since): every pending job of the
--    queue that waited at least one step and is below its target, at most `batch` a statement,
--    until a statement finds fewer; then done = now and aging_bottom the lowest enqueued priority
--    of the queue's pending jobs (read once, as the catch-up reads them).
-- A job's target is least(top, its enqueued priority + whole steps waited since run_at); a pass
-- only raises. Rows a claim holds are waited for (a claim holds them for one statement), and a
-- claimed row is left alone (it is no longer pending). Returns the jobs raised, and whether a
-- queue is still behind (the caller runs the next pass at once).
CREATE OR REPLACE FUNCTION aclaim_age_jobs(now_us bigint, batch integer, OUT raised bigint, OUT more boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    q record;
    top integer;
    bottom integer;
    upto bigint;
    n bigint;
BEGIN
    raised := 0;
    more := false;
    FOR q IN SELECT org_id, queue, aging_us, aging_done_us, aging_top, aging_bottom FROM job_queues
              WHERE aging_us IS NOT NULL ORDER BY org_id, queue LOOP
        SELECT j.priority INTO top FROM jobs j WHERE j.org_id = q.org_id AND j.state = 'pending'
         ORDER BY j.priority DESC LIMIT 1;
        SELECT j.priority INTO bottom FROM jobs j WHERE j.org_id = q.org_id AND j.state = 'pending'
         ORDER BY j.priority LIMIT 1;
        IF top IS NULL THEN
            UPDATE job_queues SET aging_done_us = now_us
             WHERE org_id = q.org_id AND queue = q.queue;
            CONTINUE;
        END IF;
        IF q.aging_done_us IS NULL OR top > coalesce(q.aging_top, top - 1) THEN
            WITH due AS MATERIALIZED (
                SELECT j.id FROM jobs j
                 WHERE j.org_id = q.org_id AND j.state = 'pending' AND j.queue = q.queue
                   AND j.run_at <= aclaim_ts(now_us - q.aging_us)
                   AND least(top, coalesce(j.base_priority, j.priority)
                                  + ((now_us - aclaim_us(j.run_at)) / q.aging_us)::int) > j.priority
                 LIMIT batch
                   FOR NO KEY UPDATE
            )
            UPDATE jobs j
               SET base_priority = coalesce(j.base_priority, j.priority),
                   priority = least(top, coalesce(j.base_priority, j.priority)
                                         + ((now_us - aclaim_us(j.run_at)) / q.aging_us)::int)
              FROM due WHERE j.id = due.id;
            GET DIAGNOSTICS n = ROW_COUNT;
            raised := raised + n;
            IF n >= batch THEN
                more := true;
            ELSE
                UPDATE job_queues
                   SET aging_done_us = now_us, aging_top = top,
                       aging_bottom = least(bottom,
                                            (SELECT min(coalesce(j.base_priority, j.priority))
                                               FROM jobs j
                                              WHERE j.org_id = q.org_id AND j.state = 'pending'
                                                AND j.queue = q.queue))
                 WHERE org_id = q.org_id AND queue = q.queue;
            END IF;
            CONTINUE;
        END IF;
        bottom := least(bottom, q.aging_bottom);
        upto := least(now_us, q.aging_done_us + 60000000);
        IF upto <= q.aging_done_us THEN
            CONTINUE;
        END IF;
        FOR k IN 1 .. least(top - bottom, 100000) LOOP
            UPDATE jobs j
               SET base_priority = coalesce(j.base_priority, j.priority),
                   priority = least(top, coalesce(j.base_priority, j.priority)
                                         + ((now_us - aclaim_us(j.run_at)) / q.aging_us)::int)
             WHERE j.org_id = q.org_id AND j.state = 'pending' AND j.queue = q.queue
               AND j.run_at > aclaim_ts(q.aging_done_us - k * q.aging_us)
               AND j.run_at <= aclaim_ts(upto - k * q.aging_us)
               AND least(top, coalesce(j.base_priority, j.priority)
                              + ((now_us - aclaim_us(j.run_at)) / q.aging_us)::int) > j.priority;
            GET DIAGNOSTICS n = ROW_COUNT;
            raised := raised + n;
        END LOOP;
        UPDATE job_queues SET aging_done_us = upto, aging_top = top, aging_bottom = bottom
         WHERE org_id = q.org_id AND queue = q.queue;
        IF upto < now_us THEN
            more := true;
        END IF;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION aclaim_age_jobs(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_age_jobs(bigint, integer) TO aclaim_coordinator;
