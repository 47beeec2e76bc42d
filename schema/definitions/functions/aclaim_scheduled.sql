-- Tells the coordinators' promoters that a job was scheduled for run_at, so that one whose
-- timer is set later re-reads the earliest run_at.
CREATE OR REPLACE FUNCTION aclaim_scheduled(run_at_us bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('aclaim_schedule', run_at_us::text);
    RETURN true;
END $$;
