DROP POLICY IF EXISTS org_scope ON job_progress;
CREATE POLICY org_scope ON job_progress TO aclaim_coordinator USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
