DROP POLICY IF EXISTS org_scope ON result_heads;
CREATE POLICY org_scope ON result_heads TO aclaim_coordinator USING (aclaim_org_visible(org_id));
