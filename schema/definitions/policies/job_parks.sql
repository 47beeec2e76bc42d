DROP POLICY IF EXISTS org_scope ON job_parks;
CREATE POLICY org_scope ON job_parks TO aclaim_coordinator USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
