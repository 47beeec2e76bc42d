-- Whether any of `reviewers` may take `job` (a job without exclusions: true).
CREATE OR REPLACE FUNCTION aclaim_excluded_for_all(job bigint, reviewers text[]) RETURNS boolean
    LANGUAGE sql STABLE AS $$
SELECT EXISTS (SELECT 1 FROM job_exclusions x WHERE x.job_id = job)
       AND NOT EXISTS (SELECT 1 FROM (SELECT DISTINCT unnest(reviewers) AS r) AS w
                        WHERE NOT aclaim_excluded(job, w.r))
$$;
