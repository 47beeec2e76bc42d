-- The log is append-only: history that can be rewritten proves nothing.
CREATE OR REPLACE FUNCTION job_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'job_events is append-only';
END $$;
