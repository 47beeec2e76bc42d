-- Weighted queues and priority aging (docs/operations.md, "Weights and aging").
--
-- Weights. A queue's weight (1-1000, NULL: none) is its share of the claims that serve it
-- together with other weighted queues, when all of them have work: stride scheduling, kept on
-- the queue's row. weight_pass is the queue's position in the round, in units of one job of a
-- weight-1 queue: a claim hands out the jobs whose finish, pass + k / weight for the queue's
-- k-th job of the claim, is least, and moves each queue's pass on by what it took. A queue that
-- comes back after an idle time (or is new to weights) starts no further back than one unit
-- behind the furthest of the queues served with it, so it never banks more than its weight of
-- jobs. Claims on a weighted queue take its advisory lock exclusive (kClaimLocks, as for a rate
-- limit), so that each reads the passes the previous one wrote, whatever the number of
-- coordinators. A claim serving no weighted queue reads and writes none of this.
--
-- Aging. A queue aged every aging_us microseconds (NULL: not aged) has the priority of each of its
-- pending jobs raised by one for each aging_us the job has waited since its run_at, up to the
-- highest priority among its organization's pending jobs, by a periodic pass in the coordinator
-- (coordinator/db/ager.cpp), so that the claim stays one index scan of jobs_claim_order.
-- base_priority keeps the priority the job was enqueued with, set the first time the pass raises
-- it and NULL for every job that was never aged: jobs of queues that are not aged carry nothing
-- more and no index grows.
ALTER TABLE job_queues
    ADD COLUMN weight      integer CHECK (weight BETWEEN 1 AND 1000),
    ADD COLUMN weight_pass numeric,
    ADD COLUMN aging_us    bigint  CHECK (aging_us >= 1000000);

ALTER TABLE jobs ADD COLUMN base_priority integer;

-- The aging pass of every organization runs as the owner (the coordinator's role may update jobs
-- of the organization in scope only), one bounded batch per call: the pending jobs of aged queues
-- whose priority is below what their wait gives them, oldest first per queue, each raised in one
-- update. Rows a claim holds are passed over (they are being claimed). Returns how many it raised.
CREATE FUNCTION aclaim_age_jobs(now_us bigint, batch integer) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
WITH aged AS (
    SELECT q.org_id, q.queue, q.aging_us,
           (SELECT j.priority FROM jobs j WHERE j.org_id = q.org_id AND j.state = 'pending'
             ORDER BY j.priority DESC LIMIT 1) AS top
      FROM job_queues q
     WHERE q.aging_us IS NOT NULL
), due AS MATERIALIZED (
    SELECT j.id,
           least(a.top, coalesce(j.base_priority, j.priority)
                        + ((now_us - aclaim_us(j.run_at)) / a.aging_us)::int) AS target
      FROM aged a
      JOIN jobs j ON j.org_id = a.org_id AND j.state = 'pending' AND j.queue = a.queue
                 AND j.run_at <= aclaim_ts(now_us - a.aging_us)
     WHERE least(a.top, coalesce(j.base_priority, j.priority)
                        + ((now_us - aclaim_us(j.run_at)) / a.aging_us)::int) > j.priority
     LIMIT batch
       FOR NO KEY UPDATE OF j SKIP LOCKED
), raised AS (
    UPDATE jobs j SET base_priority = coalesce(j.base_priority, j.priority), priority = due.target
      FROM due
     WHERE j.id = due.id
    RETURNING 1
)
SELECT count(*) FROM raised
$$;
REVOKE ALL ON FUNCTION aclaim_age_jobs(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_age_jobs(bigint, integer) TO aclaim_coordinator;
