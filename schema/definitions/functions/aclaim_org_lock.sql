-- Advisory lock keys: an organization's queue settings (taken shared by every claim, exclusive
-- by pause, resume and limit changes) and one limited queue (exclusive, by the claims on it).
CREATE OR REPLACE FUNCTION aclaim_org_lock(org bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN hashtextextended('aclaim queues of ' || org::text, 0);
