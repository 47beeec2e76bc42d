-- The hot path's index diet (docs/performance.md, "Indexes on the hot tables"). A claim and a
-- completion each write a new version of the job's row, which cannot be HOT (they change the
-- state every partial index depends on), so every index that version belongs to gets an entry.
-- Two of them served only the console, `aclaimctl queue list` and the per-queue gauges:
--  * jobs_org_state (org_id, state, queue, run_at), a full index: an entry at the claim and
--    another at the completion. It now holds the resting states only, where a job waits or has
--    ended other than by completing; the two states the hot path writes are counted through the
--    partial indexes those transitions already pay for: assigned through jobs_assigned_queue
--    (org_id, queue), completed through jobs_finished (org_id, queue, state, completed_at).
--  * jobs_completed_at (org_id, completed_at) WHERE completed: the completions per minute, which
--    jobs_finished answers with one range per queue.
-- The readers go through the three functions below, which pick the index for each state, so no
-- statement has to know which index holds which state. A job's enqueue writes what it wrote
-- before (one entry here), a release or a reclaim back to pending one entry as before.
-- Built in the migration's transaction, which blocks writes to jobs while it builds: on a large
-- installation apply it in a quiet moment, as 0006 and 0011.
DROP INDEX jobs_org_state;
CREATE INDEX jobs_org_state ON jobs (org_id, state, queue, run_at)
    WHERE state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled', 'quarantined');
DROP INDEX jobs_completed_at;

-- The least organization above `after` (NULL: the least of all) that has a job: one probe of
-- each index that leads with the organization and together covers every state.
CREATE FUNCTION aclaim_next_org(after bigint) RETURNS bigint
LANGUAGE sql STABLE AS $$
SELECT min(o) FROM (
    (SELECT org_id FROM jobs
      WHERE state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled', 'quarantined')
        AND org_id > coalesce(after, 0) ORDER BY org_id LIMIT 1)
    UNION ALL
    (SELECT org_id FROM jobs
      WHERE state = 'assigned' AND org_id > coalesce(after, 0) ORDER BY org_id LIMIT 1)
    UNION ALL
    (SELECT org_id FROM jobs
      WHERE state IN ('completed', 'failed', 'discarded', 'cancelled')
        AND org_id > coalesce(after, 0) ORDER BY org_id LIMIT 1)
) first(o)
$$;

-- The least queue above `after` (NULL: the least) holding a job of organization `org` in state
-- `st`, from the index that holds that state. Queue names are never empty (the queue_name check),
-- so '' sorts below every one.
CREATE FUNCTION aclaim_next_queue(org bigint, st text, after text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF st = 'assigned' THEN
        RETURN (SELECT queue FROM jobs WHERE org_id = org AND state = 'assigned'
                   AND queue > coalesce(after, '') ORDER BY queue LIMIT 1);
    ELSIF st = 'completed' THEN
        RETURN (SELECT queue FROM jobs WHERE org_id = org AND state = 'completed'
                   AND queue > coalesce(after, '') ORDER BY queue LIMIT 1);
    END IF;
    RETURN (SELECT queue FROM jobs
             WHERE org_id = org AND state = st
               AND state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled',
                             'quarantined')
               AND queue > coalesce(after, '') ORDER BY queue LIMIT 1);
END
$$;

-- Organization `org`'s jobs in state `st` (and queue `q`; NULL: every queue), counted up to
-- cap + 1 (NULL: all) by an index-only scan of the index that holds the state.
CREATE FUNCTION aclaim_count_in(org bigint, st text, q text, cap bigint) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    lim bigint := CASE WHEN cap IS NULL THEN NULL ELSE cap + 1 END;
BEGIN
    IF st = 'assigned' THEN
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
                                 'quarantined') LIMIT lim) c);
    END IF;
    RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs
             WHERE org_id = org AND state = st AND queue = q
               AND state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled',
                             'quarantined') LIMIT lim) c);
END
$$;

GRANT EXECUTE ON FUNCTION aclaim_next_org(bigint), aclaim_next_queue(bigint, text, text),
    aclaim_count_in(bigint, text, text, bigint) TO PUBLIC;
