-- aclaim_ts and aclaim_us as immutable expressions, so that the planner inlines them. Their first
-- bodies used timestamptz + interval and extract(epoch FROM timestamptz), which PostgreSQL marks
-- stable (they may depend on the session's time zone); a function declared immutable around a
-- stable body is never inlined, so every call in every row of every statement went through the
-- SQL-function executor. Going through timestamp without time zone, read as UTC, gives the same
-- values with immutable operators only: 'epoch' is 1970-01-01 00:00 UTC either way, and an
-- interval of microseconds adds the same to both types.
CREATE OR REPLACE FUNCTION aclaim_ts(us bigint) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN ('epoch'::timestamp + us * interval '1 microsecond') AT TIME ZONE 'UTC';
