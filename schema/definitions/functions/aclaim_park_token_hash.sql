-- The stored form of a token as the wire carries it (64 hex digits); NULL for anything else.
CREATE OR REPLACE FUNCTION aclaim_park_token_hash(token text) RETURNS bytea
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN token ~ '^[0-9a-f]{64}$' THEN sha256(decode(token, 'hex')) END;

GRANT EXECUTE ON FUNCTION aclaim_park_token_hash(text) TO aclaim_coordinator;
