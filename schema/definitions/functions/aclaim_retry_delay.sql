-- The wait before retry number `attempt` (1 = the first retry): base * 2^(attempt-1), capped,
-- with "equal jitter" (half fixed, half spread) so that jobs failed together do not come back
-- together. The spread is a hash of the job and the attempt, not random(): the same attempt of
-- the same job always gets the same delay, so a statement may compute it twice and a test can
-- predict it.
CREATE OR REPLACE FUNCTION aclaim_retry_delay(job bigint, attempt integer, base_us bigint, cap_us bigint)
    RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (WITH e AS (SELECT least(cap_us::float8,
                                    base_us * power(2::float8, least(greatest(attempt, 1), 62) - 1))
                                  AS full_us)
            SELECT (full_us / 2 + full_us / 2 *
                    ((hashint8extended(job, attempt) & 1023)::float8 / 1024))::bigint FROM e);
