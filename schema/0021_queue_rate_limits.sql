-- Rate limits per queue: at most rate_per_s claims a second on average, and at most rate_burst at
-- once, across every coordinator. A token bucket held on the queue's row: rate_tokens is what the
-- bucket held at rate_refilled_us (microseconds since the epoch, the claim's `now`), and what it
-- holds at a later instant t is least(rate_burst, rate_tokens + rate_per_s * (t -
-- rate_refilled_us) / 1e6). NULL tokens (a limit just set) is a full bucket. NULL rate_per_s is no
-- limit, and then the other three columns are not read.
--
-- Claims on a rate-limited queue take the queue's advisory lock exclusive (kClaimLocks, as a
-- concurrency limit does), read the bucket in the claim statement's snapshot, taken after the
-- lock, and spend one token per job handed out in the same statement; so the bucket is exact
-- whatever the number of coordinators. The arithmetic is numeric (exact decimal), so that no
-- rounding ever adds a token. A claim on a queue without a rate writes nothing here.
ALTER TABLE job_queues
    ADD COLUMN rate_per_s       numeric CHECK (rate_per_s > 0 AND rate_per_s <= 1000000),
    ADD COLUMN rate_burst       integer CHECK (rate_burst > 0),
    ADD COLUMN rate_tokens      numeric CHECK (rate_tokens >= 0),
    ADD COLUMN rate_refilled_us bigint,
    ADD CONSTRAINT job_queues_rate_burst CHECK (rate_per_s IS NULL OR rate_burst IS NOT NULL);

-- The tokens a queue's bucket holds at now_us (NULL: the queue has no rate limit). A clock that
-- reads earlier than the last spend (another coordinator's, a little behind) adds nothing.
-- Immutable and a single expression, so that the planner inlines it into the claim.
CREATE FUNCTION aclaim_rate_tokens(rate numeric, burst integer, tokens numeric, refilled_us bigint,
                                   now_us bigint) RETURNS numeric
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN rate IS NULL THEN NULL
                WHEN tokens IS NULL OR refilled_us IS NULL THEN burst::numeric
                ELSE least(burst::numeric,
                           tokens + rate * greatest(now_us - refilled_us, 0) / 1000000) END;

-- The first instant, at or after now_us, at which the bucket holds a whole token: what a claim
-- that found the bucket empty waits for (rounded up to the microsecond, so never too early).
CREATE FUNCTION aclaim_rate_refill_us(rate numeric, burst integer, tokens numeric,
                                      refilled_us bigint, now_us bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN now_us + greatest(0, ceil((1 - aclaim_rate_tokens(rate, burst, tokens, refilled_us,
                                                              now_us)) * 1000000 / rate))::bigint;
