-- As in 0013 and 0008, over the two indexes by job.
CREATE OR REPLACE FUNCTION jobs_forget_outcomes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_outcomes o
     WHERE o.job_id IN (SELECT g.id FROM gone g) AND o.outcome = 'completed';
    DELETE FROM job_outcomes o
     WHERE o.job_id IN (SELECT g.id FROM gone g) AND o.outcome <> 'completed';
    RETURN NULL;
END $$;
