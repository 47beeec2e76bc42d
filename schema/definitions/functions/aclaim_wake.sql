-- Wakes coordinators whose claims are parked waiting for work in an organization. The
-- notification is delivered only when the surrounding transaction commits.
CREATE OR REPLACE FUNCTION aclaim_wake(org bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('aclaim_jobs', org::text);
    RETURN true;
END $$;

-- Wakes the coordinators whose claims are parked on this organization's queue (delivered at
-- commit; notifications with the same payload in one transaction are delivered once).
CREATE OR REPLACE FUNCTION aclaim_wake(org bigint, queue_name text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('aclaim_jobs', org::text || ':' || queue_name);
    RETURN true;
END $$;
