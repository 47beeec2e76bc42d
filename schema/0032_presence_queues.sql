-- Which queues each connected reviewer serves, beside its name (coordinator_presence.reviewers,
-- schema/0025): an object from the reviewer's name to the queues its sessions on that
-- coordinator serve, e.g. {"K1": ["intake", "inspect"]}. The console counts, for a job waiting
-- on its exclusions, only the reviewers that serve the job's queue. NULL where `reviewers` is
-- NULL (more reviewers than the publisher names) and from a coordinator that does not publish
-- it: the console then takes each named reviewer as serving every queue.
ALTER TABLE coordinator_presence ADD COLUMN serving jsonb
    CHECK (serving IS NULL OR jsonb_typeof(serving) = 'object');
