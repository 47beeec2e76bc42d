-- Whether `reviewer` is excluded from `job`: named, or the completer of a named job that
-- completed, or anyone while a named job has not ended (so that the reviewer who will complete
-- it cannot hold the job meanwhile). A named job that is gone was pruned, and its completer was
-- written as a named reviewer then (jobs_resolve_exclusions). The claim statements' aware
-- variants and aclaim_exclusion_slots call it; it reads the newest committed rows its statement
-- sees, and a completion that commits after the claim's snapshot was still 'assigned' in it.
CREATE OR REPLACE FUNCTION aclaim_excluded(job bigint, reviewer text) RETURNS boolean
    LANGUAGE sql STABLE AS $$
SELECT EXISTS (
    SELECT 1 FROM job_exclusions x LEFT JOIN jobs d ON d.id = x.completer_of
     WHERE x.job_id = job
       AND (x.excluded_key = reviewer
            OR (d.id IS NOT NULL
                AND (d.state NOT IN ('completed', 'failed', 'discarded', 'cancelled')
                     OR (d.state = 'completed' AND d.assignee = reviewer)))))
$$;
