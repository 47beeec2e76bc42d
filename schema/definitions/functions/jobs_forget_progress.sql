-- A removed job takes its progress with it, as it takes its outcomes: once per statement,
-- over the removed rows, so the statements on jobs that remove nothing pay nothing.
CREATE OR REPLACE FUNCTION jobs_forget_progress() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_progress p WHERE p.job_id IN (SELECT g.id FROM gone g);
    RETURN NULL;
END $$;
