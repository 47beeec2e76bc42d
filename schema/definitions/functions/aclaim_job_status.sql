-- The status of the caller's organization's jobs, named by id or by dedupe key (either may be
-- NULL); unknown and foreign ones are not returned. Times in microseconds since the epoch.
CREATE OR REPLACE FUNCTION aclaim_job_status(job_ids bigint[] DEFAULT NULL, dedupe_keys text[] DEFAULT NULL,
                                  org bigint DEFAULT NULL)
    RETURNS TABLE (id bigint, queue text, state text, priority integer, attempts integer,
                   max_attempts integer, dedupe_key text, enqueued_us bigint, run_at_us bigint,
                   finished_us bigint, result_ref text, last_error text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    o bigint := aclaim_api_org(org);
BEGIN
    RETURN QUERY
    SELECT j.id, j.queue, j.state, j.priority, j.attempts, j.max_attempts, j.dedupe_key,
           aclaim_us(j.enqueued_at), aclaim_us(j.run_at), aclaim_us(j.completed_at),
           j.result_ref, j.last_error
      FROM jobs j
     WHERE j.org_id = o AND (j.id = ANY(job_ids) OR j.dedupe_key = ANY(dedupe_keys))
     ORDER BY j.id;
END $$;

REVOKE ALL ON FUNCTION aclaim_job_status(bigint[], text[], bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_job_status(bigint[], text[], bigint) TO aclaim_producer;
