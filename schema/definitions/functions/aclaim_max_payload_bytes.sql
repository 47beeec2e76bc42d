-- ASSIGNED carries a job's payload in one frame of at most 1 MiB (docs/protocol.md), and the JSON
-- encoding may write a byte as six. 128 KiB keeps every single job deliverable in either encoding;
-- a larger document belongs elsewhere, with a reference to it in the payload.
CREATE OR REPLACE FUNCTION aclaim_max_payload_bytes() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN 131072;
