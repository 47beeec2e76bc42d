-- The schedules with a tick due at now_us, earliest first: the scheduler's read every interval,
-- one statement outside any transaction. SECURITY DEFINER: it sees every organization's
-- schedules without the scope a transaction would have to set first, and discloses only ids
-- (ticking one then locks its row in a transaction scoped as usual).
CREATE OR REPLACE FUNCTION aclaim_schedules_due(now_us bigint, max_rows integer) RETURNS SETOF bigint
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
    SELECT id FROM schedules WHERE NOT paused AND next_tick_at <= aclaim_ts(now_us)
     ORDER BY next_tick_at LIMIT max_rows
$$;

REVOKE ALL ON FUNCTION aclaim_schedules_due(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_schedules_due(bigint, integer) TO aclaim_coordinator;
