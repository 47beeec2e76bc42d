-- A queue given a weight (it had none): its jobs enqueued before are marked, after the enqueues
-- under way commit (the weight lock, exclusive; the statements after it read them, each with a
-- snapshot taken after the lock). The organization's queue lock first, exclusive, as `queue set`
-- holds it already: no claim moves a pending job to assigned meanwhile, however the weight is
-- set. One statement per index that holds the states, so that none reads the table:
-- jobs_assigned_queue, jobs_waiting, then jobs_org_state. In that order: a
-- job leaves assigned or waiting only for a state a later statement marks, and one that changes
-- under a statement is skipped by it (its new state fails the condition) and read by the next, with
-- a later snapshot. A weight changed from one value to another marks nothing: its jobs are marked
-- already.
CREATE OR REPLACE FUNCTION job_queues_weighed() RETURNS trigger LANGUAGE plpgsql AS $$
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
