-- How long a count is kept: 30 days, in microseconds.
CREATE OR REPLACE FUNCTION aclaim_park_refusals_kept_us() RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN 30::bigint * 86400 * 1000000;
