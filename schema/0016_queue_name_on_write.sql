-- The queue name's pattern is checked where a name is written, not on every row version.
--
-- As a CHECK constraint (0005) it was evaluated on every new version of a job's row, so on every
-- claim and every completion, neither of which touches the queue: a regular-expression match
-- twice a job, about 6 us of PostgreSQL's CPU a job in the raw batch loop of aclaim-bench (63.3
-- and 62.3 against 57.8 and 56.3 without it, alternating; docs/performance.md, lever eight). A
-- name is written only by an insert or by an UPDATE that sets the column, which is exactly when
-- this trigger's WHEN clause is evaluated; the function runs only for a name that fails it, and
-- refuses it as the constraint did: SQLSTATE check_violation, constraint "queue_name".
ALTER TABLE jobs DROP CONSTRAINT queue_name;

CREATE FUNCTION jobs_queue_name_refused() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'check_violation',
        MESSAGE = format('new row for relation "jobs" violates check constraint "queue_name": '
                         '%L is not a queue name (1..64 of A-Z a-z 0-9 _ . : -, starting with a '
                         'letter or digit)', NEW.queue),
        CONSTRAINT = 'queue_name', TABLE = 'jobs', COLUMN = 'queue';
END
$$;

CREATE TRIGGER jobs_queue_name BEFORE INSERT OR UPDATE OF queue ON jobs
    FOR EACH ROW WHEN (NEW.queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$')
    EXECUTE FUNCTION jobs_queue_name_refused();
