-- Organization `org`'s jobs in state `st` (and queue `q`; NULL: every queue), counted up to
-- cap + 1 (NULL: all) by an index-only scan of the index that holds the state.
CREATE OR REPLACE FUNCTION aclaim_count_in(org bigint, st text, q text, cap bigint) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    lim bigint := CASE WHEN cap IS NULL THEN NULL ELSE cap + 1 END;
BEGIN
    IF st = 'waiting' THEN
        RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE org_id = org AND state = 'waiting'
                   AND (q IS NULL OR queue = q) LIMIT lim) c);
    ELSIF st = 'assigned' THEN
        RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE org_id = org AND state = 'assigned'
                   AND (q IS NULL OR queue = q) LIMIT lim) c);
    ELSIF st = 'completed' THEN
        IF q IS NULL THEN
            RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs
                     WHERE org_id = org AND state = 'completed' LIMIT lim) c);
        END IF;
        RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs
                 WHERE org_id = org AND queue = q AND state = 'completed' LIMIT lim) c);
    END IF;
    IF q IS NULL THEN
        RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs
                 WHERE org_id = org AND state = st
                   AND state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled',
                                 'quarantined', 'parked') LIMIT lim) c);
    END IF;
    RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs
             WHERE org_id = org AND state = st AND queue = q
               AND state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled',
                             'quarantined', 'parked') LIMIT lim) c);
END
$$;
