-- The browser console (aclaim-console): operator accounts, and what keeps its overview cheap on a
-- big table.
--
-- console_operators: who may sign in to the console. The password is stored only as libsodium's
-- crypto_pwhash_str (Argon2id, with its salt and cost inside the string). org_ids NULL means every
-- organization; otherwise the operator sees and acts only in the listed ones, enforced by the
-- console running its reads and actions under the row-level security role (0003).
CREATE TABLE console_operators (
    name          text        PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_.@-]{1,64}$'),
    password_hash text        NOT NULL,
    org_ids       bigint[]    CHECK (org_ids IS NULL OR cardinality(org_ids) > 0),
    created_at    timestamptz NOT NULL DEFAULT now(),
    disabled_at   timestamptz
);

-- The overview reads only these, never the whole table:
--  * jobs_org_state: the organizations (a skip scan, one probe per organization) and per-state
--    counts counted up to a cap by index-only scans; above the cap the count is the planner's
--    estimate, which the statistics below make per (organization, state). Its write cost falls on
--    inserts and on state changes, which already update the claim-order index, so renewals stay
--    HOT (they touch only lease_expires_at).
--  * jobs_completed_at: completions per minute over the last hour, one range of the index per
--    organization.
--  * jobs_quarantined: the quarantine inbox, which should be short however large the table is.
--  * job_events_rejected: rejections by reason over the last hour; rejections are rare, so the
--    partial index is small and costs nothing on the other events.
-- Built in the migration's transaction, which blocks writes to the table while they build: on a
-- large installation, apply this migration in a quiet moment.
CREATE INDEX jobs_org_state ON jobs (org_id, state);
CREATE INDEX jobs_completed_at ON jobs (org_id, completed_at) WHERE state = 'completed';
CREATE INDEX jobs_quarantined ON jobs (id) WHERE state = 'quarantined';
CREATE INDEX job_events_rejected ON job_events (at) INCLUDE (org_id) WHERE kind = 'rejected';
CREATE STATISTICS jobs_org_state_mcv (mcv) ON org_id, state FROM jobs;
