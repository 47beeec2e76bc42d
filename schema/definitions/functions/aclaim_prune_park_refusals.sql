-- Removes at most `batch` counts whose hour ended aclaim_park_refusals_kept_us() before now_us;
-- returns how many. The coordinators' retention pass calls it until it comes back short.
-- SECURITY DEFINER: the coordinator's role may not delete by itself, only through this predicate.
CREATE OR REPLACE FUNCTION aclaim_prune_park_refusals(now_us bigint, batch integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    gone integer;
BEGIN
    DELETE FROM park_refusal_counts c
     WHERE (c.period_start, c.source, c.reason) IN (
        SELECT o.period_start, o.source, o.reason FROM park_refusal_counts o
         WHERE o.period_start < aclaim_ts(now_us - aclaim_park_refusals_kept_us() - 3600000000)
         ORDER BY o.period_start LIMIT greatest(batch, 0));
    GET DIAGNOSTICS gone = ROW_COUNT;
    RETURN gone;
END $$;

REVOKE ALL ON FUNCTION aclaim_prune_park_refusals(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_prune_park_refusals(bigint, integer) TO aclaim_coordinator;
