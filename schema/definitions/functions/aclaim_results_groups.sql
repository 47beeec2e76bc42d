-- The consumer groups of the caller's organization (a trusted caller passing NULL: of every
-- organization) with how far each is behind: positions given and not acknowledged, plus outcomes
-- committed and not yet given a position.
CREATE OR REPLACE FUNCTION aclaim_results_groups(org bigint DEFAULT NULL)
    RETURNS TABLE (org_id bigint, name text, acked bigint, head bigint, lag bigint,
                   created_us bigint, acked_us bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    o bigint := aclaim_api_org(org, true);
BEGIN
    RETURN QUERY
    SELECT g.org_id, g.name, g.acked, coalesce(h.last_seq, 0),
           greatest(coalesce(h.last_seq, 0) - g.acked, 0) + coalesce(u.n, 0),
           aclaim_us(g.created_at), aclaim_us(g.acked_at)
      FROM result_groups g
      LEFT JOIN result_heads h ON h.org_id = g.org_id
      LEFT JOIN (SELECT x.org_id, count(*) AS n FROM job_outcomes x WHERE x.seq IS NULL
                  GROUP BY x.org_id) AS u ON u.org_id = g.org_id
     WHERE o IS NULL OR g.org_id = o
     ORDER BY g.org_id, g.name;
END $$;

REVOKE ALL ON FUNCTION aclaim_results_groups(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_results_groups(bigint) TO aclaim_producer;
