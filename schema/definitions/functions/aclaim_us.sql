CREATE OR REPLACE FUNCTION aclaim_us(ts timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (extract(epoch FROM ts AT TIME ZONE 'UTC') * 1000000)::bigint;
