-- Cancels the caller's organization's listed jobs that are pending, scheduled or assigned (see
-- aclaim_cancel_jobs); the others (finished, or another organization's) are left alone and not
-- returned. Audited as cancelled by "producer <login>".
CREATE OR REPLACE FUNCTION aclaim_cancel(job_ids bigint[], reason text, org bigint DEFAULT NULL,
                              now_us bigint DEFAULT NULL)
    RETURNS TABLE (id bigint, was text)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    o bigint := aclaim_api_org(org);
BEGIN
    IF reason IS NULL OR btrim(reason) = '' THEN
        RAISE EXCEPTION 'cancel: say why (reason => ...); it is recorded in job_events'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT c.id, c.was
      FROM aclaim_cancel_jobs(o, job_ids, 'producer ' || session_user, reason,
                              coalesce(now_us, aclaim_us(statement_timestamp()))) AS c;
END $$;

REVOKE ALL ON FUNCTION aclaim_cancel(bigint[], text, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_cancel(bigint[], text, bigint, bigint) TO aclaim_producer;
