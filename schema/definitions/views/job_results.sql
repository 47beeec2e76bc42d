-- The completed outcomes as the results table they replaced: the previous release's coordinators
-- write completions into it (job_results_insert, schema/baseline/tables.sql), consumers read it.
CREATE OR REPLACE VIEW job_results WITH (security_invoker = true) AS
SELECT job_id, org_id, generation, result_ref, at AS published_at
  FROM job_outcomes WHERE outcome = 'completed';
COMMENT ON VIEW job_results IS
    'The completed outcomes: one row per completed job, its generation and result reference.';
GRANT SELECT ON job_results TO aclaim_coordinator, aclaim_producer;
