CREATE OR REPLACE FUNCTION aclaim_queue_lock(org bigint, queue_name text) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN hashtextextended('aclaim queue ' || org::text || ':' || queue_name, 0);
