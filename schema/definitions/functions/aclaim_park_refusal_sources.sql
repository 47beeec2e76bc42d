-- Sources with a row of their own per hour; the rest share '(other sources)'.
CREATE OR REPLACE FUNCTION aclaim_park_refusal_sources() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN 300;
