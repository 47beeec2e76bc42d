DROP POLICY IF EXISTS org_scope ON job_events;
CREATE POLICY org_scope ON job_events TO aclaim_coordinator USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));

DROP POLICY IF EXISTS producer_scope ON job_events;
CREATE POLICY producer_scope ON job_events FOR SELECT TO aclaim_producer USING ((org_id = ( SELECT aclaim_producer_org() AS aclaim_producer_org)));
