-- Binds a login to an organization (run by the schema's owner: `aclaimctl producers bind`). A
-- login that row-level security does not apply to, or that can act as the coordinator, is refused:
-- the binding would confine nothing.
CREATE OR REPLACE FUNCTION aclaim_producer_bind(login_name name, org bigint, actor text, now_us bigint)
    RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r pg_roles%ROWTYPE;
BEGIN
    SELECT * INTO r FROM pg_roles WHERE rolname = login_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no role %: create the login first (CREATE ROLE % LOGIN PASSWORD ...)',
            login_name, login_name USING ERRCODE = 'undefined_object';
    END IF;
    IF r.rolsuper OR r.rolbypassrls THEN
        RAISE EXCEPTION 'login % is a superuser or bypasses row-level security: it cannot be '
                        'confined to an organization', login_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF pg_has_role(login_name, 'aclaim_coordinator', 'MEMBER')
       OR EXISTS (SELECT 1 FROM pg_tables WHERE tablename = 'jobs' AND schemaname = current_schema()
                     AND pg_has_role(login_name, tableowner, 'MEMBER')) THEN
        RAISE EXCEPTION 'login % can act as the coordinator or owns the tables: use a login of its '
                        'own for the producer', login_name USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF org IS NULL OR org <= 0 THEN
        RAISE EXCEPTION 'organization % is not a positive id', org
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('GRANT aclaim_producer TO %I', login_name);
    INSERT INTO producer_logins (login, org_id, bound_at, bound_by)
    VALUES (login_name, org, aclaim_ts(now_us), actor)
    ON CONFLICT (login) DO UPDATE SET org_id = EXCLUDED.org_id, bound_at = EXCLUDED.bound_at,
                                      bound_by = EXCLUDED.bound_by;
END $$;

REVOKE ALL ON FUNCTION aclaim_producer_bind(name, bigint, text, bigint) FROM PUBLIC;
