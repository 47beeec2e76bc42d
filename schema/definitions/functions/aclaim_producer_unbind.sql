-- Removes a login's binding and its membership of aclaim_producer; true when it was bound.
CREATE OR REPLACE FUNCTION aclaim_producer_unbind(login_name name) RETURNS boolean
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM producer_logins WHERE login = login_name;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = login_name) THEN
        EXECUTE format('REVOKE aclaim_producer FROM %I', login_name);
    END IF;
    RETURN true;
END $$;

REVOKE ALL ON FUNCTION aclaim_producer_unbind(name) FROM PUBLIC;
