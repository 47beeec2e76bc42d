-- Worker authentication and organization isolation in depth.
--
-- worker_keys: the CURVE public keys the coordinator's ZAP handler accepts, each bound to one
-- organization and one worker name. A revoked key stays as a record of who held it.
CREATE TABLE worker_keys (
    public_key  text        PRIMARY KEY CHECK (length(public_key) = 40),  -- Z85 of 32 bytes
    org_id      bigint      NOT NULL CHECK (org_id > 0),
    name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
-- One live key per worker would forbid rotation; a name may hold several keys while workers move.
CREATE INDEX worker_keys_live ON worker_keys (org_id, name) WHERE revoked_at IS NULL;

-- aclaim_coordinator: a NOLOGIN role that the coordinator's store connections SET ROLE into.
-- Row-level security applies to it (it neither owns the tables nor bypasses RLS), so a statement
-- that forgot its org_id filter still sees only the organization named by the per-transaction
-- setting aclaim.org_id. Roles are cluster-wide: create it once, whatever database runs this.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'aclaim_coordinator') THEN
        CREATE ROLE aclaim_coordinator NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;  -- another database's migration created it at the same moment
END $$;

-- The login role the coordinator connects as must be a member to SET ROLE; the role running the
-- migrations is, when it is not a superuser.
DO $$
BEGIN
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('GRANT aclaim_coordinator TO %I', current_user);
    END IF;
END $$;

GRANT SELECT, INSERT, UPDATE ON jobs, job_events, job_results TO aclaim_coordinator;
GRANT SELECT ON worker_keys, schema_migrations TO aclaim_coordinator;

-- True when the transaction may see rows of the organization: aclaim.org_id names it, or is
-- 'system' (the reaper and recovery, which work across organizations). Unset means nothing is
-- visible: forgetting the setting fails closed. Text comparison, so a malformed setting can never
-- raise inside a policy.
CREATE FUNCTION aclaim_org_visible(org bigint) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN coalesce(current_setting('aclaim.org_id', true), '') IN ('system', org::text);

ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE job_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE job_results ENABLE ROW LEVEL SECURITY;

CREATE POLICY org_scope ON jobs TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
CREATE POLICY org_scope ON job_events TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
CREATE POLICY org_scope ON job_results TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
