-- The first instant, at or after now_us, at which the bucket holds a whole token: what a claim
-- that found the bucket empty waits for (rounded up to the microsecond, so never too early).
CREATE OR REPLACE FUNCTION aclaim_rate_refill_us(rate numeric, burst integer, tokens numeric,
                                      refilled_us bigint, now_us bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN now_us + greatest(0, ceil((1 - aclaim_rate_tokens(rate, burst, tokens, refilled_us,
                                                              now_us)) * 1000000 / rate))::bigint;
