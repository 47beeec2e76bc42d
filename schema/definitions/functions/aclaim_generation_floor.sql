-- The lowest generation a claim on this timeline may grant, less one.
CREATE OR REPLACE FUNCTION aclaim_generation_floor() RETURNS bigint
    LANGUAGE sql STABLE
    RETURN (aclaim_timeline() - 1) << 32;

GRANT EXECUTE ON FUNCTION aclaim_generation_floor() TO aclaim_coordinator;
