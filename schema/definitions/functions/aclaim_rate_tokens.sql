-- The tokens a queue's bucket holds at now_us (NULL: the queue has no rate limit). A clock that
-- reads earlier than the last spend (another coordinator's, a little behind) adds nothing.
-- Immutable and a single expression, so that the planner inlines it into the claim.
CREATE OR REPLACE FUNCTION aclaim_rate_tokens(rate numeric, burst integer, tokens numeric, refilled_us bigint,
                                   now_us bigint) RETURNS numeric
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN rate IS NULL THEN NULL
                WHEN tokens IS NULL OR refilled_us IS NULL THEN burst::numeric
                ELSE least(burst::numeric,
                           tokens + rate * greatest(now_us - refilled_us, 0) / 1000000) END;
