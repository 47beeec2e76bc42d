DROP POLICY IF EXISTS org_scope ON job_prunes;
CREATE POLICY org_scope ON job_prunes TO aclaim_coordinator USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
