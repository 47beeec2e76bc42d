-- The organization an API call acts in. A bound login acts in its own organization only (naming
-- another is refused); a member of aclaim_producer that is not bound is refused; any other caller
-- with EXECUTE (the schema's owner, or a role the owner trusted with a grant) names it, or, where
-- `all_allowed`, passes NULL for every organization.
CREATE OR REPLACE FUNCTION aclaim_api_org(org bigint, all_allowed boolean DEFAULT false) RETURNS bigint
    LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    bound bigint := aclaim_producer_org();
BEGIN
    IF bound IS NOT NULL THEN
        IF org IS NOT NULL AND org <> bound THEN
            RAISE EXCEPTION 'login % acts for organization % only, not for %', session_user,
                bound, org USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN bound;
    END IF;
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = session_user)
       AND pg_has_role(session_user, 'aclaim_producer', 'MEMBER') THEN
        RAISE EXCEPTION 'login % is a producer not bound to an organization in this database',
            session_user USING ERRCODE = 'insufficient_privilege',
            HINT = 'aclaimctl producers bind --login <login> --org <organization>';
    END IF;
    IF org IS NULL AND NOT all_allowed THEN
        RAISE EXCEPTION 'name the organization (org => N): login % is not bound to one',
            session_user USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF org <= 0 THEN
        RAISE EXCEPTION 'organization % is not a positive id', org
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN org;
END $$;

REVOKE ALL ON FUNCTION aclaim_api_org(bigint, boolean) FROM PUBLIC;
