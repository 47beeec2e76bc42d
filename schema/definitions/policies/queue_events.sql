DROP POLICY IF EXISTS org_scope ON queue_events;
CREATE POLICY org_scope ON queue_events TO aclaim_coordinator USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
