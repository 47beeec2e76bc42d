-- Counts one refused token of `who` for `why` in the hour of `at_ts`. Called by
-- aclaim_finish_parked, which runs as the owner; nobody else may count.
CREATE OR REPLACE FUNCTION aclaim_count_park_refusal(at_ts timestamptz, who text, why text, head text)
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    -- The hour in UTC, whatever the session's time zone.
    period timestamptz := aclaim_ts(aclaim_us(at_ts) / 3600000000 * 3600000000);
    src text := left(who, 200);
BEGIN
    UPDATE park_refusal_counts c
       SET refusals = c.refusals + 1, last_at = greatest(c.last_at, at_ts), last_hash_head = head
     WHERE c.period_start = period AND c.source = src AND c.reason = why;
    IF FOUND THEN
        RETURN;
    END IF;
    IF (SELECT count(*) FROM (SELECT 1 FROM park_refusal_counts c WHERE c.period_start = period
                               LIMIT aclaim_park_refusal_sources()) AS x)
       >= aclaim_park_refusal_sources() THEN
        src := '(other sources)';
    END IF;
    INSERT INTO park_refusal_counts AS c (period_start, source, reason, refusals, first_at,
                                          last_at, last_hash_head)
    VALUES (period, src, why, 1, at_ts, at_ts, head)
    ON CONFLICT (period_start, source, reason) DO UPDATE
       SET refusals = c.refusals + 1, last_at = greatest(c.last_at, excluded.last_at),
           last_hash_head = excluded.last_hash_head;
END $$;

REVOKE ALL ON FUNCTION aclaim_count_park_refusal(timestamp with time zone, text, text, text) FROM PUBLIC;
