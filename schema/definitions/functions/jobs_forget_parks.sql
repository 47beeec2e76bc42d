CREATE OR REPLACE FUNCTION jobs_forget_parks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_parks p WHERE p.job_id IN (SELECT g.id FROM gone g);
    RETURN NULL;
END $$;
