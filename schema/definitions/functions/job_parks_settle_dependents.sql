-- aclaim_finish_parked ends a parked job (completed, failed, or discarded on its last
-- attempt) and then marks its park used, in one transaction. Marking it used settles the job's
-- dependents as every other ending does, in that transaction: only a park's row fires this, so
-- nothing else pays for it, and a refused callback (which marks nothing) unblocks nothing.
CREATE OR REPLACE FUNCTION job_parks_settle_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    j record;
BEGIN
    SELECT id, state, has_dependents INTO j FROM jobs WHERE id = NEW.job_id;
    IF j.has_dependents AND j.state IN ('completed', 'failed', 'discarded') THEN
        PERFORM aclaim_dependencies_settled(aclaim_us(NEW.used_at), ARRAY[j.id], ARRAY[j.state]);
    END IF;
    RETURN NULL;
END $$;
