-- aclaim baseline: schema version 32, its bindings
--
-- Applied after tables.sql and the definitions of schema/definitions/, whose functions these
-- name (see tables.sql). Never changes once landed.

-- Row triggers: the event logs are append-only, job_results accepts the completions of writers
-- that still insert into it, and the jobs' dependents, exclusions, parks, progress and outcomes
-- follow a job's changes.
CREATE TRIGGER job_events_no_update BEFORE DELETE OR UPDATE ON job_events FOR EACH ROW EXECUTE FUNCTION job_events_append_only();
CREATE TRIGGER job_parks_settle_dependents AFTER UPDATE OF used_at ON job_parks FOR EACH ROW WHEN (((old.used_at IS NULL) AND (new.used_at IS NOT NULL))) EXECUTE FUNCTION job_parks_settle_dependents();
CREATE TRIGGER job_prunes_no_update BEFORE DELETE OR UPDATE ON job_prunes FOR EACH ROW EXECUTE FUNCTION job_events_append_only();
CREATE TRIGGER job_queues_weighed AFTER UPDATE OF weight ON job_queues FOR EACH ROW WHEN (((old.weight IS NULL) AND (new.weight IS NOT NULL))) EXECUTE FUNCTION job_queues_weighed();
CREATE TRIGGER job_queues_weighed_new AFTER INSERT ON job_queues FOR EACH ROW WHEN ((new.weight IS NOT NULL)) EXECUTE FUNCTION job_queues_weighed();
CREATE TRIGGER job_results_insert INSTEAD OF INSERT ON job_results FOR EACH ROW EXECUTE FUNCTION job_results_insert_of_completion();
CREATE TRIGGER jobs_default_run_at BEFORE INSERT ON jobs FOR EACH ROW WHEN ((new.run_at IS NULL)) EXECUTE FUNCTION jobs_default_run_at();
CREATE TRIGGER jobs_forget_dependencies AFTER DELETE ON jobs REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION jobs_forget_dependencies();
CREATE TRIGGER jobs_forget_outcomes AFTER DELETE ON jobs REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION jobs_forget_outcomes();
CREATE TRIGGER jobs_forget_parks AFTER DELETE ON jobs REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION jobs_forget_parks();
CREATE TRIGGER jobs_forget_progress AFTER DELETE ON jobs REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION jobs_forget_progress();
CREATE TRIGGER jobs_queue_name BEFORE INSERT OR UPDATE OF queue ON jobs FOR EACH ROW WHEN ((new.queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'::text)) EXECUTE FUNCTION jobs_queue_name_refused();
CREATE TRIGGER jobs_resolve_exclusions AFTER DELETE ON jobs REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION jobs_resolve_exclusions();
CREATE TRIGGER queue_events_no_update BEFORE DELETE OR UPDATE ON queue_events FOR EACH ROW EXECUTE FUNCTION job_events_append_only();
CREATE TRIGGER schedule_events_no_update BEFORE DELETE OR UPDATE ON schedule_events FOR EACH ROW EXECUTE FUNCTION job_events_append_only();

-- Writers that still insert completions into job_results (its trigger turns each into an
-- outcome) may: the coordinator's role inserts through the view.
GRANT INSERT ON job_results TO aclaim_coordinator;

-- The monthly partitions of job_events from this month through three months ahead; the
-- coordinators' retention pass adds the later ones.
SELECT aclaim_ensure_event_partitions(aclaim_us(now()), 3);
