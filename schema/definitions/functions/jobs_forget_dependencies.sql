-- Pruning a finished job forgets the edges it waited on (a probe of the primary key per job).
-- The edges of a pruned dependency stay, resolved, until their dependent is pruned in turn: only a
-- finished job is pruned, and its ending resolved every edge to it.
CREATE OR REPLACE FUNCTION jobs_forget_dependencies() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_dependencies d WHERE d.job_id IN (SELECT id FROM gone);
    RETURN NULL;
END $$;
