-- A job that is removed takes its outcomes with it, so that job_outcomes does not grow with every
-- job ever run: once per statement, over the removed rows (a transition table), one probe of each
-- of the two indexes by job per job for a prune batch (aclaim_prune_jobs is the only statement
-- that removes jobs); the other statements on jobs pay nothing.
CREATE OR REPLACE FUNCTION jobs_forget_outcomes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_outcomes o
     WHERE o.job_id IN (SELECT g.id FROM gone g) AND o.outcome = 'completed';
    DELETE FROM job_outcomes o
     WHERE o.job_id IN (SELECT g.id FROM gone g) AND o.outcome <> 'completed';
    RETURN NULL;
END $$;
