-- A pruned job takes its own exclusions with it; an exclusion that names a pruned job that
-- completed becomes one that names its completer, so that it still excludes them. Once per
-- statement over the removed rows, as jobs_forget_dependencies.
CREATE OR REPLACE FUNCTION jobs_resolve_exclusions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_exclusions (org_id, job_id, excluded_key)
    SELECT x.org_id, x.job_id, g.assignee
      FROM job_exclusions x JOIN gone g ON g.id = x.completer_of
     WHERE g.state = 'completed' AND x.job_id NOT IN (SELECT id FROM gone);
    DELETE FROM job_exclusions x
     WHERE x.job_id IN (SELECT id FROM gone) OR x.completer_of IN (SELECT id FROM gone);
    RETURN NULL;
END $$;
