-- The least queue above `after` (NULL: the least) holding a job of organization `org` in state
-- `st`, from the index that holds that state. Queue names are never empty (the queue_name check),
-- so '' sorts below every one.
CREATE OR REPLACE FUNCTION aclaim_next_queue(org bigint, st text, after text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF st = 'waiting' THEN
        RETURN (SELECT queue FROM jobs WHERE org_id = org AND state = 'waiting'
                   AND queue > coalesce(after, '') ORDER BY queue LIMIT 1);
    ELSIF st = 'assigned' THEN
        RETURN (SELECT queue FROM jobs WHERE org_id = org AND state = 'assigned'
                   AND queue > coalesce(after, '') ORDER BY queue LIMIT 1);
    ELSIF st = 'completed' THEN
        RETURN (SELECT queue FROM jobs WHERE org_id = org AND state = 'completed'
                   AND queue > coalesce(after, '') ORDER BY queue LIMIT 1);
    END IF;
    RETURN (SELECT queue FROM jobs
             WHERE org_id = org AND state = st
               AND state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled',
                             'quarantined', 'parked')
               AND queue > coalesce(after, '') ORDER BY queue LIMIT 1);
END
$$;
