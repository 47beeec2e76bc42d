CREATE OR REPLACE FUNCTION aclaim_weight_lock(org bigint, queue_name text) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN hashtextextended('aclaim queue weight ' || org::text || ':' || queue_name, 0);
