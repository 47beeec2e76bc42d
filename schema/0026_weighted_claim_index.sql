-- The weighted claim's scan of a weighted queue, through an index that leads with the queue.
--
-- The weighted claim (common/store/store_sql.hpp, claim_weighted_text) reads each served queue on
-- its own, in claim order. Through jobs_claim_order (org_id, priority DESC, run_at, id), which
-- does not lead with the queue, the scan of a queue whose every job ranks below another served
-- queue's reads past all of that queue's entries first: 910 ms a claim at 1,000,000 pending
-- against 0.5 ms for the flat claim (docs/performance.md, "Weighted queues and the claim").
--
-- jobs.weighed marks the jobs of weighted queues (true; NULL for every other job), and
-- jobs_weighted_order holds the pending ones only, by queue and then in claim order: a job of a
-- queue without a weight has no entry in it and writes nothing more on enqueue, claim or
-- completion (the predicate is evaluated, no entry is made). The marker stays on a job's row
-- through every transition, so a marked job that goes back to pending (a retry, a release, a
-- reclaimed lease, a promotion, an unblocked dependent) is in the index again.
--
-- Who marks:
--  * aclaim_enqueue_job (every enqueue path: the store's kEnqueue, the producer API, schedules),
--    when the queue has a weight as it enqueues;
--  * giving a queue a weight (a trigger on job_queues, whatever sets it: `aclaimctl queue set
--    --weight`, an older release's, or SQL) marks the queue's jobs that can still become pending
--    (pending, scheduled, waiting, assigned, parked, quarantined), in the transaction that sets it;
--  * an operator's retry of a failed, discarded or cancelled job marks it when its queue has a
--    weight (kOperatorRetry);
--  * this migration, the jobs of the queues that already have a weight.
-- Removing a weight leaves the marks: an unweighted queue is read through jobs_claim_order, and
-- its marked jobs leave the index as they are claimed.
--
-- The race between setting a weight and enqueues: each enqueue takes the queue's weight lock
-- (aclaim_weight_lock) shared before it reads the queue's settings, and holds it to its commit;
-- giving a weight takes it exclusive before it marks. An enqueue that read "no weight" commits
-- before the marking reads the jobs, and one that waits for the setting reads the weight after
-- it committed, so no job of a weighted queue is left unmarked. A lock in the shared lock table,
-- nothing written.
-- No CHECK (weighed): a constraint is evaluated on every new version of every job's row (see 0016).
ALTER TABLE jobs ADD COLUMN weighed boolean;

CREATE FUNCTION aclaim_weight_lock(org bigint, queue_name text) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN hashtextextended('aclaim queue weight ' || org::text || ':' || queue_name, 0);

UPDATE jobs j SET weighed = true
  FROM job_queues q
 WHERE q.weight IS NOT NULL AND j.org_id = q.org_id AND j.queue = q.queue
   AND j.state IN ('pending', 'scheduled', 'waiting', 'assigned', 'parked', 'quarantined');

-- A queue given a weight (it had none): its jobs enqueued before are marked, after the enqueues
-- under way commit (the weight lock, exclusive; the statements after it read them, each with a
-- snapshot taken after the lock). The organization's queue lock first, exclusive, as `queue set`
-- holds it already: no claim moves a pending job to assigned meanwhile, however the weight is
-- set. One statement per index that holds the states, so that none reads the table:
-- jobs_assigned_queue (0005), jobs_waiting (0024), then jobs_org_state (0023). In that order: a
-- job leaves assigned or waiting only for a state a later statement marks, and one that changes
-- under a statement is skipped by it (its new state fails the condition) and read by the next, with
-- a later snapshot. A weight changed from one value to another marks nothing: its jobs are marked
-- already.
CREATE FUNCTION job_queues_weighed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(aclaim_org_lock(NEW.org_id));
    PERFORM pg_advisory_xact_lock(aclaim_weight_lock(NEW.org_id, NEW.queue));
    UPDATE jobs SET weighed = true
     WHERE org_id = NEW.org_id AND queue = NEW.queue AND weighed IS NULL AND state = 'assigned';
    UPDATE jobs SET weighed = true
     WHERE org_id = NEW.org_id AND queue = NEW.queue AND weighed IS NULL AND state = 'waiting';
    UPDATE jobs SET weighed = true
     WHERE org_id = NEW.org_id AND queue = NEW.queue AND weighed IS NULL
       AND state IN ('pending', 'scheduled', 'parked', 'quarantined');
    RETURN NULL;
END $$;
CREATE TRIGGER job_queues_weighed_new AFTER INSERT ON job_queues
    FOR EACH ROW WHEN (NEW.weight IS NOT NULL) EXECUTE FUNCTION job_queues_weighed();
CREATE TRIGGER job_queues_weighed AFTER UPDATE OF weight ON job_queues
    FOR EACH ROW WHEN (OLD.weight IS NULL AND NEW.weight IS NOT NULL)
    EXECUTE FUNCTION job_queues_weighed();

CREATE INDEX jobs_weighted_order ON jobs (org_id, queue, priority DESC, run_at, id)
    WHERE state = 'pending' AND weighed;

-- As 0005's, with the weight lock taken before the queue's settings are read and the job marked
-- when its queue has a weight.
CREATE OR REPLACE FUNCTION aclaim_enqueue_job(
    org bigint, now_us bigint, queue_name text, payload text, priority integer,
    run_at_us bigint, max_attempts integer, backoff_base_us bigint, backoff_cap_us bigint,
    run_timeout_us bigint, dedupe_key text, dedupe_window_us bigint,
    OUT id bigint, OUT created boolean, OUT state text)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    q job_queues%ROWTYPE;
    at_us bigint := greatest(coalesce(run_at_us, now_us), now_us);
    held record;
    base_us bigint;
    cap_us bigint;
BEGIN
    queue_name := coalesce(queue_name, 'default');
    PERFORM pg_advisory_xact_lock_shared(aclaim_weight_lock(org, queue_name));
    SELECT * INTO q FROM job_queues jq WHERE jq.org_id = org AND jq.queue = queue_name;
    base_us := coalesce(backoff_base_us, q.backoff_base_us, 0);
    cap_us := greatest(coalesce(backoff_cap_us, q.backoff_cap_us, 300000000), base_us);
    state := CASE WHEN at_us > now_us THEN 'scheduled' ELSE 'pending' END;
    LOOP
        INSERT INTO jobs AS j (org_id, queue, state, priority, enqueued_at, run_at, payload,
                               max_attempts, backoff_base_us, backoff_cap_us, run_timeout_us,
                               dedupe_key, weighed)
        VALUES (org, queue_name, state, coalesce(priority, 0), aclaim_ts(now_us),
                aclaim_ts(at_us), coalesce(payload, ''),
                coalesce(max_attempts, q.max_attempts, 3), base_us, cap_us,
                coalesce(run_timeout_us, q.run_timeout_us), dedupe_key,
                CASE WHEN q.weight IS NOT NULL THEN true END)
        ON CONFLICT (org_id, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
        RETURNING j.id INTO id;
        IF id IS NOT NULL THEN
            created := true;
            INSERT INTO job_events (job_id, org_id, generation, kind, at, detail)
            VALUES (id, org, 0, 'enqueued', aclaim_ts(now_us),
                    'queue ' || queue_name || CASE WHEN state = 'scheduled'
                        THEN '; run at ' || aclaim_ts(at_us)::text ELSE '' END);
            IF state = 'scheduled' THEN
                PERFORM aclaim_scheduled(at_us);
            ELSE
                PERFORM aclaim_wake(org, queue_name);
            END IF;
            RETURN;
        END IF;
        SELECT j.id, j.state, j.completed_at INTO held
          FROM jobs j WHERE j.org_id = org AND j.dedupe_key = aclaim_enqueue_job.dedupe_key
           FOR UPDATE;
        CONTINUE WHEN NOT FOUND;  -- its holder released it meanwhile: insert again
        IF held.state NOT IN ('completed', 'failed', 'discarded', 'cancelled')
           OR held.completed_at > aclaim_ts(now_us - coalesce(dedupe_window_us, 0)) THEN
            id := held.id;
            created := false;
            state := held.state;
            RETURN;
        END IF;
        UPDATE jobs j SET dedupe_key = NULL WHERE j.id = held.id;
    END LOOP;
END $$;
