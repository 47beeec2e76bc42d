CREATE OR REPLACE FUNCTION aclaim_results_group_drop(group_name text, org bigint DEFAULT NULL)
    RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM result_groups g WHERE g.org_id = aclaim_api_org(org) AND g.name = group_name;
    RETURN FOUND;
END $$;

REVOKE ALL ON FUNCTION aclaim_results_group_drop(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_results_group_drop(text, bigint) TO aclaim_producer;
