-- Enqueues one job, or returns the job that holds its dedupe_key. Race-free under concurrent
-- producers: the unique index jobs_dedupe decides, and INSERT .. ON CONFLICT waits for an
-- uncommitted holder of the key and then sees it. A key held by a finished job is released
-- (set to NULL on that row) once dedupe_window_us has passed since it finished, and the insert
-- is tried again. NULL arguments take the queue's setting, then the built-in default. The weight
-- lock is taken before the queue's settings are read, and the job is marked when its queue has a
-- weight. Runs as the caller: row-level security applies.
CREATE OR REPLACE FUNCTION aclaim_enqueue_job(
    org bigint, now_us bigint, queue_name text, payload text, priority integer,
    run_at_us bigint, max_attempts integer, backoff_base_us bigint, backoff_cap_us bigint,
    run_timeout_us bigint, dedupe_key text, dedupe_window_us bigint,
    OUT id bigint, OUT created boolean, OUT state text)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    q job_queues%ROWTYPE;
    at_us bigint := greatest(coalesce(run_at_us, now_us), now_us);
    held record;
    base_us bigint;
    cap_us bigint;
BEGIN
    queue_name := coalesce(queue_name, 'default');
    PERFORM pg_advisory_xact_lock_shared(aclaim_weight_lock(org, queue_name));
    SELECT * INTO q FROM job_queues jq WHERE jq.org_id = org AND jq.queue = queue_name;
    base_us := coalesce(backoff_base_us, q.backoff_base_us, 0);
    cap_us := greatest(coalesce(backoff_cap_us, q.backoff_cap_us, 300000000), base_us);
    state := CASE WHEN at_us > now_us THEN 'scheduled' ELSE 'pending' END;
    LOOP
        INSERT INTO jobs AS j (org_id, queue, state, priority, enqueued_at, run_at, payload,
                               max_attempts, backoff_base_us, backoff_cap_us, run_timeout_us,
                               dedupe_key, weighed)
        VALUES (org, queue_name, state, coalesce(priority, 0), aclaim_ts(now_us),
                aclaim_ts(at_us), coalesce(payload, ''),
                coalesce(max_attempts, q.max_attempts, 3), base_us, cap_us,
                coalesce(run_timeout_us, q.run_timeout_us), dedupe_key,
                CASE WHEN q.weight IS NOT NULL THEN true END)
        ON CONFLICT (org_id, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
        RETURNING j.id INTO id;
        IF id IS NOT NULL THEN
            created := true;
            INSERT INTO job_events (job_id, org_id, generation, kind, at, detail)
            VALUES (id, org, 0, 'enqueued', aclaim_ts(now_us),
                    'queue ' || queue_name || CASE WHEN state = 'scheduled'
                        THEN '; run at ' || aclaim_ts(at_us)::text ELSE '' END);
            IF state = 'scheduled' THEN
                PERFORM aclaim_scheduled(at_us);
            ELSE
                PERFORM aclaim_wake(org, queue_name);
            END IF;
            RETURN;
        END IF;
        SELECT j.id, j.state, j.completed_at INTO held
          FROM jobs j WHERE j.org_id = org AND j.dedupe_key = aclaim_enqueue_job.dedupe_key
           FOR UPDATE;
        CONTINUE WHEN NOT FOUND;  -- its holder released it meanwhile: insert again
        IF held.state NOT IN ('completed', 'failed', 'discarded', 'cancelled')
           OR held.completed_at > aclaim_ts(now_us - coalesce(dedupe_window_us, 0)) THEN
            id := held.id;
            created := false;
            state := held.state;
            RETURN;
        END IF;
        UPDATE jobs j SET dedupe_key = NULL WHERE j.id = held.id;
    END LOOP;
END $$;
