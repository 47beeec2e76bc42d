DROP POLICY IF EXISTS org_scope ON schedule_ticks;
CREATE POLICY org_scope ON schedule_ticks TO aclaim_coordinator USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
