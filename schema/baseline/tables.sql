-- aclaim baseline: schema version 32
--
-- The tables of schema version 32 as one file: every table with its sequences, defaults,
-- constraints, indexes, row-level security switch and privileges, in name order, then what joins
-- tables together. A fresh database is built from it in three steps (`aclaimctl migrate`):
-- this file, then every definition of schema/definitions/ (functions, views, policies), then
-- bindings.sql (the triggers, which need their functions, and the event log's monthly
-- partitions); the numbered migrations after version 32 follow. A database that applied the
-- numbered migrations 0001 to 0032 of earlier releases is at this baseline already: their
-- checksums stay pinned in schema/checksums. Like a numbered migration, this file never changes
-- once landed.

-- The roles the coordinator's store connections and the producers' logins act as. Roles are
-- cluster-wide: each is created once, whatever database is migrated first.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'aclaim_coordinator') THEN
        CREATE ROLE aclaim_coordinator NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'aclaim_producer') THEN
        CREATE ROLE aclaim_producer NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;  -- another database's migration created it at the same moment
END $$;

-- The role running the migrations is the coordinator's login, which must be a member of
-- aclaim_coordinator to SET ROLE into it (a superuser needs no membership).
DO $$
BEGIN
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('GRANT aclaim_coordinator TO %I', current_user);
    END IF;
END $$;

CREATE TABLE console_operators (
    name text NOT NULL,
    password_hash text NOT NULL,
    org_ids bigint[],
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    disabled_at timestamp with time zone,
    CONSTRAINT console_operators_name_check CHECK ((name ~ '^[A-Za-z0-9_.@-]{1,64}$'::text)),
    CONSTRAINT console_operators_org_ids_check CHECK (((org_ids IS NULL) OR (cardinality(org_ids) > 0)))
);
ALTER TABLE ONLY console_operators ADD CONSTRAINT console_operators_pkey PRIMARY KEY (name);

CREATE TABLE console_sessions (
    token_hash text NOT NULL,
    operator text NOT NULL,
    csrf text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT console_sessions_token_hash_check CHECK ((token_hash ~ '^[0-9a-f]{64}$'::text))
);
ALTER TABLE ONLY console_sessions ADD CONSTRAINT console_sessions_pkey PRIMARY KEY (token_hash);
CREATE INDEX console_sessions_expires_at ON console_sessions USING btree (expires_at);
CREATE INDEX console_sessions_operator ON console_sessions USING btree (operator);
ALTER TABLE console_sessions ENABLE ROW LEVEL SECURITY;

CREATE TABLE coordinator_presence (
    org_id bigint NOT NULL,
    coordinator text NOT NULL,
    endpoint text NOT NULL,
    workers integer NOT NULL,
    interval_ms integer NOT NULL,
    started_at timestamp with time zone NOT NULL,
    seen_at timestamp with time zone NOT NULL,
    reviewers text[],
    serving jsonb,
    CONSTRAINT coordinator_presence_coordinator_check CHECK (((length(coordinator) >= 1) AND (length(coordinator) <= 300))),
    CONSTRAINT coordinator_presence_interval_ms_check CHECK ((interval_ms > 0)),
    CONSTRAINT coordinator_presence_org_id_check CHECK ((org_id > 0)),
    CONSTRAINT coordinator_presence_serving_check CHECK (((serving IS NULL) OR (jsonb_typeof(serving) = 'object'::text))),
    CONSTRAINT coordinator_presence_workers_check CHECK ((workers >= 0))
);
ALTER TABLE ONLY coordinator_presence ADD CONSTRAINT coordinator_presence_pkey PRIMARY KEY (org_id, coordinator);
ALTER TABLE coordinator_presence ENABLE ROW LEVEL SECURITY;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE coordinator_presence TO aclaim_coordinator;

CREATE TABLE job_dependencies (
    org_id bigint NOT NULL,
    job_id bigint NOT NULL,
    depends_on bigint NOT NULL,
    policy text DEFAULT 'cancel'::text NOT NULL,
    resolved text,
    resolved_at timestamp with time zone,
    CONSTRAINT job_dependencies_check CHECK ((job_id <> depends_on)),
    CONSTRAINT job_dependencies_check1 CHECK (((resolved IS NULL) = (resolved_at IS NULL))),
    CONSTRAINT job_dependencies_org_id_check CHECK ((org_id > 0)),
    CONSTRAINT job_dependencies_policy_check CHECK ((policy = ANY (ARRAY['cancel'::text, 'run'::text]))),
    CONSTRAINT job_dependencies_resolved_check CHECK ((resolved = ANY (ARRAY['completed'::text, 'failed'::text, 'discarded'::text, 'cancelled'::text])))
);
ALTER TABLE ONLY job_dependencies ADD CONSTRAINT job_dependencies_pkey PRIMARY KEY (job_id, depends_on);
CREATE INDEX job_dependencies_dependents ON job_dependencies USING btree (depends_on, job_id);
CREATE INDEX job_dependencies_on ON job_dependencies USING btree (depends_on) WHERE (resolved IS NULL);
ALTER TABLE job_dependencies ENABLE ROW LEVEL SECURITY;
GRANT SELECT,INSERT,UPDATE ON TABLE job_dependencies TO aclaim_coordinator;
GRANT SELECT ON TABLE job_dependencies TO aclaim_producer;

CREATE TABLE job_event_partitions (
    name text NOT NULL,
    from_at timestamp with time zone,
    to_at timestamp with time zone NOT NULL,
    state text DEFAULT 'attached'::text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    archived_at timestamp with time zone,
    archive_file text,
    rows bigint,
    min_id bigint,
    max_id bigint,
    sha256 text,
    CONSTRAINT job_event_partitions_check CHECK (((from_at IS NULL) OR (from_at < to_at))),
    CONSTRAINT job_event_partitions_check1 CHECK (((state = ANY (ARRAY['attached'::text, 'detaching'::text])) OR ((archived_at IS NOT NULL) AND (rows IS NOT NULL)))),
    CONSTRAINT job_event_partitions_state_check CHECK ((state = ANY (ARRAY['attached'::text, 'detaching'::text, 'archived'::text, 'dropped'::text])))
);
ALTER TABLE ONLY job_event_partitions ADD CONSTRAINT job_event_partitions_pkey PRIMARY KEY (name);
GRANT SELECT ON TABLE job_event_partitions TO aclaim_coordinator;

CREATE TABLE job_events (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    org_id bigint NOT NULL,
    generation bigint NOT NULL,
    kind text NOT NULL,
    worker text,
    at timestamp with time zone NOT NULL,
    detail text DEFAULT ''::text NOT NULL
)
PARTITION BY RANGE (at);
CREATE SEQUENCE job_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE job_events_id_seq OWNED BY job_events.id;
ALTER TABLE ONLY job_events ALTER COLUMN id SET DEFAULT nextval('job_events_id_seq'::regclass);
CREATE INDEX job_events_job ON ONLY job_events USING btree (job_id, id);
CREATE INDEX job_events_rejected ON ONLY job_events USING btree (at) INCLUDE (org_id) WHERE (kind = 'rejected'::text);
ALTER TABLE job_events ENABLE ROW LEVEL SECURITY;
GRANT SELECT,INSERT ON TABLE job_events TO aclaim_coordinator;
GRANT SELECT ON TABLE job_events TO aclaim_producer;
GRANT USAGE ON SEQUENCE job_events_id_seq TO aclaim_coordinator;

CREATE TABLE job_events_legacy (
    id bigint DEFAULT NULL NOT NULL,
    job_id bigint NOT NULL,
    org_id bigint NOT NULL,
    generation bigint NOT NULL,
    kind text NOT NULL,
    worker text,
    at timestamp with time zone NOT NULL,
    detail text DEFAULT ''::text NOT NULL
);
CREATE INDEX job_events_legacy_job ON job_events_legacy USING btree (job_id, id);
CREATE INDEX job_events_legacy_rejected ON job_events_legacy USING btree (at) INCLUDE (org_id) WHERE (kind = 'rejected'::text);

CREATE TABLE job_exclusions (
    org_id bigint NOT NULL,
    job_id bigint NOT NULL,
    excluded_key text,
    completer_of bigint,
    CONSTRAINT job_exclusions_check CHECK (((excluded_key IS NULL) <> (completer_of IS NULL))),
    CONSTRAINT job_exclusions_check1 CHECK ((completer_of IS DISTINCT FROM job_id)),
    CONSTRAINT job_exclusions_excluded_key_check CHECK ((excluded_key <> ''::text)),
    CONSTRAINT job_exclusions_org_id_check CHECK ((org_id > 0))
);
CREATE INDEX job_exclusions_completer ON job_exclusions USING btree (completer_of) WHERE (completer_of IS NOT NULL);
CREATE INDEX job_exclusions_job ON job_exclusions USING btree (job_id);
ALTER TABLE job_exclusions ENABLE ROW LEVEL SECURITY;
GRANT SELECT,INSERT ON TABLE job_exclusions TO aclaim_coordinator;
GRANT SELECT ON TABLE job_exclusions TO aclaim_producer;

CREATE TABLE job_outcomes (
    id bigint GENERATED ALWAYS AS IDENTITY,
    org_id bigint NOT NULL,
    job_id bigint NOT NULL,
    seq bigint,
    outcome text NOT NULL,
    queue text NOT NULL,
    generation bigint NOT NULL,
    attempts integer NOT NULL,
    result_ref text,
    error text,
    dedupe_key text,
    at timestamp with time zone NOT NULL,
    CONSTRAINT completed_has_result CHECK (((outcome = 'completed'::text) = (result_ref IS NOT NULL))),
    CONSTRAINT job_outcomes_outcome_check CHECK ((outcome = ANY (ARRAY['completed'::text, 'failed'::text, 'discarded'::text, 'cancelled'::text]))),
    CONSTRAINT job_outcomes_seq_check CHECK ((seq > 0))
)
WITH (fillfactor='90');
CREATE INDEX job_outcomes_ended ON job_outcomes USING btree (job_id) WHERE (outcome <> 'completed'::text);
CREATE UNIQUE INDEX job_outcomes_result ON job_outcomes USING btree (job_id) WHERE (outcome = 'completed'::text);
CREATE UNIQUE INDEX job_outcomes_seq ON job_outcomes USING btree (org_id, seq) WHERE (seq IS NOT NULL);
CREATE INDEX job_outcomes_unsequenced ON job_outcomes USING btree (id) INCLUDE (org_id) WHERE (seq IS NULL);
ALTER TABLE job_outcomes ENABLE ROW LEVEL SECURITY;
GRANT SELECT,INSERT ON TABLE job_outcomes TO aclaim_coordinator;
GRANT SELECT ON TABLE job_outcomes TO aclaim_producer;

CREATE TABLE job_parks (
    token_hash bytea NOT NULL,
    job_id bigint NOT NULL,
    org_id bigint NOT NULL,
    generation bigint NOT NULL,
    parked_by text NOT NULL,
    parked_at timestamp with time zone NOT NULL,
    deadline_at timestamp with time zone NOT NULL,
    note text DEFAULT ''::text NOT NULL,
    used_at timestamp with time zone,
    used_by text,
    outcome text,
    CONSTRAINT job_parks_generation_check CHECK ((generation > 0)),
    CONSTRAINT job_parks_note_check CHECK ((octet_length(note) <= 200)),
    CONSTRAINT job_parks_org_id_check CHECK ((org_id > 0)),
    CONSTRAINT job_parks_outcome_check CHECK ((outcome = ANY (ARRAY['completed'::text, 'failed'::text, 'retry'::text]))),
    CONSTRAINT job_parks_token_hash_check CHECK ((octet_length(token_hash) = 32)),
    CONSTRAINT used_has_outcome CHECK (((used_at IS NULL) = (outcome IS NULL)))
);
ALTER TABLE ONLY job_parks ADD CONSTRAINT job_parks_pkey PRIMARY KEY (token_hash);
ALTER TABLE ONLY job_parks ADD CONSTRAINT one_park_per_generation UNIQUE (job_id, generation);
ALTER TABLE job_parks ENABLE ROW LEVEL SECURITY;
GRANT SELECT,INSERT,UPDATE ON TABLE job_parks TO aclaim_coordinator;

CREATE TABLE job_progress (
    job_id bigint NOT NULL,
    org_id bigint NOT NULL,
    generation bigint NOT NULL,
    percent smallint NOT NULL,
    note text DEFAULT ''::text NOT NULL,
    checkpoint text DEFAULT ''::text NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT job_progress_checkpoint_check CHECK ((octet_length(checkpoint) <= 4096)),
    CONSTRAINT job_progress_note_check CHECK ((octet_length(note) <= 200)),
    CONSTRAINT job_progress_percent_check CHECK (((percent >= 0) AND (percent <= 100)))
);
ALTER TABLE ONLY job_progress ADD CONSTRAINT job_progress_pkey PRIMARY KEY (job_id);
ALTER TABLE job_progress ENABLE ROW LEVEL SECURITY;
GRANT SELECT,INSERT,UPDATE ON TABLE job_progress TO aclaim_coordinator;

CREATE TABLE job_prunes (
    id bigint GENERATED ALWAYS AS IDENTITY,
    org_id bigint NOT NULL,
    pruned_at timestamp with time zone NOT NULL,
    jobs int8multirange NOT NULL,
    completed integer DEFAULT 0 NOT NULL,
    failed integer DEFAULT 0 NOT NULL,
    discarded integer DEFAULT 0 NOT NULL,
    cancelled integer DEFAULT 0 NOT NULL,
    results integer DEFAULT 0 NOT NULL
);
ALTER TABLE ONLY job_prunes ADD CONSTRAINT job_prunes_pkey PRIMARY KEY (id);
CREATE INDEX job_prunes_org ON job_prunes USING btree (org_id, id);
ALTER TABLE job_prunes ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE job_prunes TO aclaim_coordinator;

CREATE TABLE job_queues (
    org_id bigint NOT NULL,
    queue text NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    max_assigned integer,
    max_attempts integer,
    backoff_base_us bigint,
    backoff_cap_us bigint,
    run_timeout_us bigint,
    updated_at timestamp with time zone NOT NULL,
    retain_completed_us bigint,
    retain_failed_us bigint,
    retain_discarded_us bigint,
    retain_cancelled_us bigint,
    rate_per_s numeric,
    rate_burst integer,
    rate_tokens numeric,
    rate_refilled_us bigint,
    weight integer,
    weight_pass numeric,
    aging_us bigint,
    aging_done_us bigint,
    aging_top integer,
    aging_bottom integer,
    has_exclusions boolean DEFAULT false NOT NULL,
    CONSTRAINT job_queues_aging_us_check CHECK ((aging_us >= 1000000)),
    CONSTRAINT job_queues_backoff_base_us_check CHECK ((backoff_base_us >= 0)),
    CONSTRAINT job_queues_backoff_cap_us_check CHECK ((backoff_cap_us >= 0)),
    CONSTRAINT job_queues_max_assigned_check CHECK ((max_assigned > 0)),
    CONSTRAINT job_queues_max_attempts_check CHECK ((max_attempts > 0)),
    CONSTRAINT job_queues_org_id_check CHECK ((org_id > 0)),
    CONSTRAINT job_queues_queue_check CHECK ((queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'::text)),
    CONSTRAINT job_queues_rate_burst CHECK (((rate_per_s IS NULL) OR (rate_burst IS NOT NULL))),
    CONSTRAINT job_queues_rate_burst_check CHECK ((rate_burst > 0)),
    CONSTRAINT job_queues_rate_per_s_check CHECK (((rate_per_s > (0)::numeric) AND (rate_per_s <= (1000000)::numeric))),
    CONSTRAINT job_queues_rate_tokens_check CHECK ((rate_tokens >= (0)::numeric)),
    CONSTRAINT job_queues_retain_cancelled_us_check CHECK ((retain_cancelled_us > 0)),
    CONSTRAINT job_queues_retain_completed_us_check CHECK ((retain_completed_us > 0)),
    CONSTRAINT job_queues_retain_discarded_us_check CHECK ((retain_discarded_us > 0)),
    CONSTRAINT job_queues_retain_failed_us_check CHECK ((retain_failed_us > 0)),
    CONSTRAINT job_queues_run_timeout_us_check CHECK ((run_timeout_us > 0)),
    CONSTRAINT job_queues_weight_check CHECK (((weight >= 1) AND (weight <= 1000)))
);
ALTER TABLE ONLY job_queues ADD CONSTRAINT job_queues_pkey PRIMARY KEY (org_id, queue);
ALTER TABLE job_queues ENABLE ROW LEVEL SECURITY;
GRANT SELECT,INSERT,UPDATE ON TABLE job_queues TO aclaim_coordinator;
GRANT SELECT ON TABLE job_queues TO aclaim_producer;

CREATE TABLE jobs (
    id bigint GENERATED ALWAYS AS IDENTITY,
    org_id bigint NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    enqueued_at timestamp with time zone NOT NULL,
    payload text DEFAULT ''::text NOT NULL,
    generation bigint DEFAULT 0 NOT NULL,
    assignee text,
    claimed_at timestamp with time zone,
    lease_expires_at timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 3 NOT NULL,
    completed_at timestamp with time zone,
    result_ref text,
    last_error text,
    quarantined_from text,
    quarantine_reason text,
    queue text DEFAULT 'default'::text NOT NULL,
    run_at timestamp with time zone NOT NULL,
    backoff_base_us bigint DEFAULT 0 NOT NULL,
    backoff_cap_us bigint DEFAULT 300000000 NOT NULL,
    run_timeout_us bigint,
    deadline_at timestamp with time zone,
    dedupe_key text,
    base_priority integer,
    has_dependents boolean DEFAULT false NOT NULL,
    weighed boolean,
    CONSTRAINT assigned_has_owner_and_lease CHECK (((state <> 'assigned'::text) OR ((assignee IS NOT NULL) AND (claimed_at IS NOT NULL) AND (lease_expires_at IS NOT NULL) AND (lease_expires_at > claimed_at) AND (generation > 0) AND (attempts > 0) AND (completed_at IS NULL) AND (result_ref IS NULL)))),
    CONSTRAINT backoff_cap_covers_base CHECK ((backoff_cap_us >= backoff_base_us)),
    CONSTRAINT completed_has_result_and_no_lease CHECK (((state <> 'completed'::text) OR ((result_ref IS NOT NULL) AND (completed_at IS NOT NULL) AND (lease_expires_at IS NULL) AND (assignee IS NOT NULL) AND (generation > 0)))),
    CONSTRAINT dependent_has_no_owner CHECK (((state <> 'waiting'::text) OR ((assignee IS NULL) AND (claimed_at IS NULL) AND (lease_expires_at IS NULL) AND (completed_at IS NULL) AND (result_ref IS NULL)))),
    CONSTRAINT ended_has_no_lease_nor_result CHECK (((state <> ALL (ARRAY['discarded'::text, 'cancelled'::text])) OR ((completed_at IS NOT NULL) AND (lease_expires_at IS NULL) AND (result_ref IS NULL)))),
    CONSTRAINT failed_is_final_and_has_no_lease CHECK (((state <> 'failed'::text) OR ((completed_at IS NOT NULL) AND (lease_expires_at IS NULL) AND (result_ref IS NULL)))),
    CONSTRAINT jobs_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT jobs_backoff_base_us_check CHECK ((backoff_base_us >= 0)),
    CONSTRAINT jobs_dedupe_key_check CHECK (((length(dedupe_key) >= 1) AND (length(dedupe_key) <= 256))),
    CONSTRAINT jobs_generation_check CHECK ((generation >= 0)),
    CONSTRAINT jobs_max_attempts_check CHECK ((max_attempts > 0)),
    CONSTRAINT jobs_org_id_check CHECK ((org_id > 0)),
    CONSTRAINT jobs_run_timeout_us_check CHECK ((run_timeout_us > 0)),
    CONSTRAINT jobs_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'scheduled'::text, 'assigned'::text, 'completed'::text, 'failed'::text, 'discarded'::text, 'cancelled'::text, 'quarantined'::text, 'parked'::text, 'waiting'::text]))),
    CONSTRAINT lease_within_deadline CHECK (((state <> 'assigned'::text) OR (deadline_at IS NULL) OR ((deadline_at > claimed_at) AND (lease_expires_at <= deadline_at)))),
    CONSTRAINT parked_has_holder_and_deadline CHECK (((state <> 'parked'::text) OR ((assignee IS NOT NULL) AND (claimed_at IS NOT NULL) AND (deadline_at IS NOT NULL) AND (lease_expires_at IS NULL) AND (completed_at IS NULL) AND (result_ref IS NULL) AND (generation > 0)))),
    CONSTRAINT quarantined_has_reason CHECK (((state = 'quarantined'::text) = ((quarantine_reason IS NOT NULL) AND (quarantined_from IS NOT NULL)))),
    CONSTRAINT waiting_has_no_owner CHECK (((state <> ALL (ARRAY['pending'::text, 'scheduled'::text])) OR ((assignee IS NULL) AND (claimed_at IS NULL) AND (lease_expires_at IS NULL) AND (completed_at IS NULL) AND (result_ref IS NULL))))
)
WITH (autovacuum_vacuum_scale_factor='0.02', autovacuum_analyze_scale_factor='0.02', autovacuum_vacuum_cost_limit='2000', fillfactor='50');
ALTER TABLE ONLY jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);
CREATE INDEX jobs_assigned_queue ON jobs USING btree (org_id, queue) WHERE (state = 'assigned'::text);
CREATE INDEX jobs_claim_order ON jobs USING btree (org_id, priority DESC, run_at, id) WHERE (state = 'pending'::text);
CREATE UNIQUE INDEX jobs_dedupe ON jobs USING btree (org_id, dedupe_key) WHERE (dedupe_key IS NOT NULL);
CREATE INDEX jobs_discarded ON jobs USING btree (org_id, queue) WHERE (state = 'discarded'::text);
CREATE INDEX jobs_finished ON jobs USING btree (org_id, queue, state, completed_at) WHERE (state = ANY (ARRAY['completed'::text, 'failed'::text, 'discarded'::text, 'cancelled'::text]));
CREATE INDEX jobs_org_state ON jobs USING btree (org_id, state, queue, run_at) WHERE (state = ANY (ARRAY['pending'::text, 'scheduled'::text, 'failed'::text, 'discarded'::text, 'cancelled'::text, 'quarantined'::text, 'parked'::text]));
CREATE INDEX jobs_parked_deadline ON jobs USING btree (deadline_at, id) WHERE (state = 'parked'::text);
CREATE INDEX jobs_quarantined ON jobs USING btree (id) WHERE (state = 'quarantined'::text);
CREATE INDEX jobs_scheduled ON jobs USING btree (run_at, id) WHERE (state = 'scheduled'::text);
CREATE INDEX jobs_waiting ON jobs USING btree (org_id, queue) WHERE (state = 'waiting'::text);
CREATE INDEX jobs_weighted_order ON jobs USING btree (org_id, queue, priority DESC, run_at, id) WHERE ((state = 'pending'::text) AND weighed);
CREATE STATISTICS jobs_org_state_mcv (mcv) ON org_id, state FROM jobs;
ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;
GRANT SELECT,INSERT,UPDATE ON TABLE jobs TO aclaim_coordinator;
GRANT SELECT ON TABLE jobs TO aclaim_producer;

CREATE TABLE park_refusal_counts (
    period_start timestamp with time zone NOT NULL,
    source text NOT NULL,
    reason text NOT NULL,
    refusals bigint NOT NULL,
    first_at timestamp with time zone NOT NULL,
    last_at timestamp with time zone NOT NULL,
    last_hash_head text DEFAULT ''::text NOT NULL,
    CONSTRAINT park_refusal_counts_reason_check CHECK ((reason = ANY (ARRAY['malformed'::text, 'unknown_token'::text, 'other_organization'::text]))),
    CONSTRAINT park_refusal_counts_refusals_check CHECK ((refusals > 0)),
    CONSTRAINT park_refusal_counts_source_check CHECK ((octet_length(source) <= 200))
);
ALTER TABLE ONLY park_refusal_counts ADD CONSTRAINT park_refusal_counts_pkey PRIMARY KEY (period_start, source, reason);
ALTER TABLE park_refusal_counts ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE park_refusal_counts TO aclaim_coordinator;

CREATE TABLE producer_logins (
    login name NOT NULL,
    org_id bigint NOT NULL,
    bound_at timestamp with time zone NOT NULL,
    bound_by text NOT NULL,
    CONSTRAINT producer_logins_org_id_check CHECK ((org_id > 0))
);
ALTER TABLE ONLY producer_logins ADD CONSTRAINT producer_logins_pkey PRIMARY KEY (login);
ALTER TABLE producer_logins ENABLE ROW LEVEL SECURITY;

CREATE TABLE queue_events (
    id bigint GENERATED ALWAYS AS IDENTITY,
    org_id bigint NOT NULL,
    queue text NOT NULL,
    kind text NOT NULL,
    actor text NOT NULL,
    at timestamp with time zone NOT NULL,
    detail text DEFAULT ''::text NOT NULL,
    CONSTRAINT queue_events_kind_check CHECK ((kind = ANY (ARRAY['paused'::text, 'resumed'::text, 'configured'::text])))
);
ALTER TABLE ONLY queue_events ADD CONSTRAINT queue_events_pkey PRIMARY KEY (id);
CREATE INDEX queue_events_queue ON queue_events USING btree (org_id, queue, id);
ALTER TABLE queue_events ENABLE ROW LEVEL SECURITY;
GRANT SELECT,INSERT ON TABLE queue_events TO aclaim_coordinator;

CREATE TABLE result_groups (
    org_id bigint NOT NULL,
    name text NOT NULL,
    acked bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    acked_at timestamp with time zone,
    CONSTRAINT result_groups_acked_check CHECK ((acked >= 0)),
    CONSTRAINT result_groups_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'::text)),
    CONSTRAINT result_groups_org_id_check CHECK ((org_id > 0))
);
ALTER TABLE ONLY result_groups ADD CONSTRAINT result_groups_pkey PRIMARY KEY (org_id, name);
ALTER TABLE result_groups ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE result_groups TO aclaim_coordinator;
GRANT SELECT ON TABLE result_groups TO aclaim_producer;

CREATE TABLE result_heads (
    org_id bigint NOT NULL,
    last_seq bigint NOT NULL,
    CONSTRAINT result_heads_last_seq_check CHECK ((last_seq >= 0))
);
ALTER TABLE ONLY result_heads ADD CONSTRAINT result_heads_pkey PRIMARY KEY (org_id);
ALTER TABLE result_heads ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE result_heads TO aclaim_coordinator;

CREATE TABLE schedule_events (
    id bigint GENERATED ALWAYS AS IDENTITY,
    org_id bigint NOT NULL,
    schedule_id bigint NOT NULL,
    name text NOT NULL,
    kind text NOT NULL,
    actor text NOT NULL,
    at timestamp with time zone NOT NULL,
    detail text DEFAULT ''::text NOT NULL,
    CONSTRAINT schedule_events_kind_check CHECK ((kind = ANY (ARRAY['added'::text, 'paused'::text, 'resumed'::text, 'removed'::text])))
);
ALTER TABLE ONLY schedule_events ADD CONSTRAINT schedule_events_pkey PRIMARY KEY (id);
CREATE INDEX schedule_events_schedule ON schedule_events USING btree (org_id, schedule_id, id);
ALTER TABLE schedule_events ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE schedule_events TO aclaim_coordinator;

CREATE TABLE schedule_ticks (
    id bigint GENERATED ALWAYS AS IDENTITY,
    org_id bigint NOT NULL,
    schedule_id bigint NOT NULL,
    tick_at timestamp with time zone NOT NULL,
    job_id bigint NOT NULL,
    at timestamp with time zone NOT NULL
);
ALTER TABLE ONLY schedule_ticks ADD CONSTRAINT schedule_ticks_pkey PRIMARY KEY (id);
CREATE INDEX schedule_ticks_tick ON schedule_ticks USING btree (schedule_id, tick_at);
ALTER TABLE schedule_ticks ENABLE ROW LEVEL SECURITY;
GRANT SELECT,INSERT,DELETE ON TABLE schedule_ticks TO aclaim_coordinator;

CREATE TABLE schedules (
    id bigint GENERATED ALWAYS AS IDENTITY,
    org_id bigint NOT NULL,
    name text NOT NULL,
    cron text NOT NULL,
    time_zone text NOT NULL,
    queue text NOT NULL,
    payload text DEFAULT ''::text NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    missed text DEFAULT 'skip'::text NOT NULL,
    last_tick_at timestamp with time zone,
    next_tick_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT schedules_cron_check CHECK (((length(cron) >= 9) AND (length(cron) <= 256))),
    CONSTRAINT schedules_missed_check CHECK ((missed = ANY (ARRAY['skip'::text, 'catch_up'::text]))),
    CONSTRAINT schedules_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'::text)),
    CONSTRAINT schedules_org_id_check CHECK ((org_id > 0)),
    CONSTRAINT schedules_queue_check CHECK ((queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'::text))
);
ALTER TABLE ONLY schedules ADD CONSTRAINT schedules_org_id_name_key UNIQUE (org_id, name);
ALTER TABLE ONLY schedules ADD CONSTRAINT schedules_pkey PRIMARY KEY (id);
CREATE INDEX schedules_due ON schedules USING btree (next_tick_at) WHERE (NOT paused);
ALTER TABLE schedules ENABLE ROW LEVEL SECURITY;
GRANT SELECT,UPDATE ON TABLE schedules TO aclaim_coordinator;

GRANT SELECT ON TABLE schema_migrations TO aclaim_coordinator;

CREATE TABLE worker_keys (
    public_key text NOT NULL,
    org_id bigint NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    queues text[],
    CONSTRAINT worker_keys_name_check CHECK (((length(name) >= 1) AND (length(name) <= 128))),
    CONSTRAINT worker_keys_org_id_check CHECK ((org_id > 0)),
    CONSTRAINT worker_keys_public_key_check CHECK ((length(public_key) = 40)),
    CONSTRAINT worker_keys_queues_check CHECK (((queues IS NULL) OR ((cardinality(queues) >= 1) AND (cardinality(queues) <= 32))))
);
ALTER TABLE ONLY worker_keys ADD CONSTRAINT worker_keys_pkey PRIMARY KEY (public_key);
CREATE INDEX worker_keys_live ON worker_keys USING btree (org_id, name) WHERE (revoked_at IS NULL);
GRANT SELECT ON TABLE worker_keys TO aclaim_coordinator;

CREATE SEQUENCE aclaim_exclusions_epoch
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
GRANT SELECT,USAGE ON SEQUENCE aclaim_exclusions_epoch TO aclaim_coordinator;

ALTER TABLE ONLY console_sessions ADD CONSTRAINT console_sessions_operator_fkey FOREIGN KEY (operator) REFERENCES console_operators(name) ON UPDATE CASCADE ON DELETE CASCADE;

-- job_events_legacy holds no row on a fresh database; it is the partition with the open lower
-- bound, covering every instant before the month of the migration, so that no past instant is
-- without a partition. Attaching it adopts its indexes as partitions of job_events' indexes.
DO $$
DECLARE
    bound timestamptz := date_trunc('month', now(), 'UTC');
BEGIN
    EXECUTE format('ALTER TABLE job_events ATTACH PARTITION job_events_legacy '
                   'FOR VALUES FROM (MINVALUE) TO (%L)', bound);
    INSERT INTO job_event_partitions (name, from_at, to_at, created_at)
    VALUES ('job_events_legacy', NULL, bound, now());
END $$;

-- The kinds of event, checked on every partition (added after the attach, so that it is one
-- constraint of job_events that each partition inherits). NOT VALID: rows are checked as written.
ALTER TABLE job_events ADD CONSTRAINT job_events_kind_check CHECK ((kind = ANY (ARRAY['waiting'::text, 'unblocked'::text, 'parked'::text, 'checkpoint'::text, 'enqueued'::text, 'claimed'::text, 'renewed'::text, 'completed'::text, 'failed'::text, 'released'::text, 'reclaimed'::text, 'rejected'::text, 'quarantined'::text, 'unquarantined'::text, 'due'::text, 'discarded'::text, 'cancelled'::text, 'retried'::text]))) NOT VALID;
