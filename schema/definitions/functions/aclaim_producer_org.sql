-- The organization the session's login is bound to, or NULL.
CREATE OR REPLACE FUNCTION aclaim_producer_org() RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
    RETURN (SELECT org_id FROM producer_logins WHERE login = session_user);

REVOKE ALL ON FUNCTION aclaim_producer_org() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_producer_org() TO aclaim_producer;
