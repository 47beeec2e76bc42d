DROP POLICY IF EXISTS org_scope ON coordinator_presence;
CREATE POLICY org_scope ON coordinator_presence TO aclaim_coordinator USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
