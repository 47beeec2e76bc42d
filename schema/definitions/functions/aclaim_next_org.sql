-- The least organization above `after` (NULL: the least of all) that has a job: one probe of
-- each index that leads with the organization and together covers every state (parked among
-- them, through jobs_org_state; waiting jobs through jobs_waiting).
CREATE OR REPLACE FUNCTION aclaim_next_org(after bigint) RETURNS bigint
LANGUAGE sql STABLE AS $$
SELECT min(o) FROM (
    (SELECT org_id FROM jobs
      WHERE state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled', 'quarantined', 'parked')
        AND org_id > coalesce(after, 0) ORDER BY org_id LIMIT 1)
    UNION ALL
    (SELECT org_id FROM jobs
      WHERE state = 'assigned' AND org_id > coalesce(after, 0) ORDER BY org_id LIMIT 1)
    UNION ALL
    (SELECT org_id FROM jobs
      WHERE state IN ('completed', 'failed', 'discarded', 'cancelled')
        AND org_id > coalesce(after, 0) ORDER BY org_id LIMIT 1)
    UNION ALL
    (SELECT org_id FROM jobs
      WHERE state = 'waiting' AND org_id > coalesce(after, 0) ORDER BY org_id LIMIT 1)
) first(o)
$$;
