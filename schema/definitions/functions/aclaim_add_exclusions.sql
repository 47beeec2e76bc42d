-- After the enqueue: the exclusions of the call's jobs, one array element each: job excl_n[i]
-- (1-based index in the call) excludes the reviewer excl_key[i], or whoever completes
-- excl_job[i] (a job id, or -k for job k of this call); exactly one of the two. Only created jobs
-- get them (a job a dedupe key returned keeps those it was enqueued with). Every named job must
-- be a job of `org` (refused otherwise, naming it).
CREATE OR REPLACE FUNCTION aclaim_add_exclusions(org bigint, job_ids bigint[], created boolean[],
                                      excl_n integer[], excl_key text[], excl_job bigint[])
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    IF cardinality(excl_n) IS DISTINCT FROM cardinality(excl_key)
       OR cardinality(excl_n) IS DISTINCT FROM cardinality(excl_job) THEN
        RAISE EXCEPTION 'enqueue: exclusions must be given as jobs, reviewers and named jobs of '
                        'one length (% jobs, % reviewers, % named jobs)', cardinality(excl_n),
                        cardinality(excl_key), cardinality(excl_job)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT e.k, e.n, e.key, e.on_ INTO bad
      FROM unnest(excl_n, excl_key, excl_job) WITH ORDINALITY AS e(n, key, on_, k)
     WHERE e.n IS NULL OR e.n NOT BETWEEN 1 AND cardinality(job_ids)
        OR (e.key IS NULL) = (e.on_ IS NULL) OR e.key = '' OR e.on_ = 0
        OR -e.on_ > cardinality(job_ids) OR e.on_ = -e.n
     ORDER BY e.k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'enqueue: exclusion % of this call (job % excludes reviewer % / the '
                        'completer of %) is invalid: the job is a job of this call (1 to %), and '
                        'exactly one of a reviewer name and a job (an id, or -k for job k of this '
                        'call, not the job itself) is given; nothing was enqueued', bad.k, bad.n,
                        coalesce(bad.key, '-'), coalesce(bad.on_::text, '-'), cardinality(job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT x.on_ INTO bad
      FROM unnest(excl_job) AS x(on_)
     WHERE x.on_ > 0 AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = x.on_ AND j.org_id = org)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'enqueue: job % named by an exclusion is not a job of this organization; '
                        'nothing was enqueued', bad.on_
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO job_exclusions (org_id, job_id, excluded_key, completer_of)
    SELECT DISTINCT org, job_ids[e.n], e.key,
           CASE WHEN e.on_ > 0 THEN e.on_ ELSE job_ids[-e.on_] END
      FROM unnest(excl_n, excl_key, excl_job) AS e(n, key, on_)
     WHERE coalesce(created[e.n], false)
       AND job_ids[e.n] IS DISTINCT FROM CASE WHEN e.on_ > 0 THEN e.on_ ELSE job_ids[-e.on_] END;
END $$;
