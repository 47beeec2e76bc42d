-- True when the transaction may see rows of the organization: aclaim.org_id names it, or is
-- 'system' (the reaper and recovery, which work across organizations). Unset means nothing is
-- visible: forgetting the setting fails closed. Text comparison, so a malformed setting can never
-- raise inside a policy.
CREATE OR REPLACE FUNCTION aclaim_org_visible(org bigint) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN coalesce(current_setting('aclaim.org_id', true), '') IN ('system', org::text);
