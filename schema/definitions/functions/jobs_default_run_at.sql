-- A row inserted without run_at (by hand, or by a tool written before it existed) is runnable
-- from its enqueue, as every job was before. aclaim_enqueue_job always sets it, so the trigger's
-- function never runs on the enqueue path: the WHEN clause is checked without calling it.
CREATE OR REPLACE FUNCTION jobs_default_run_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.run_at := NEW.enqueued_at;
    RETURN NEW;
END $$;
