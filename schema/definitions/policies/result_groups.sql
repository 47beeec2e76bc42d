DROP POLICY IF EXISTS org_scope ON result_groups;
CREATE POLICY org_scope ON result_groups TO aclaim_coordinator USING (aclaim_org_visible(org_id));

DROP POLICY IF EXISTS producer_scope ON result_groups;
CREATE POLICY producer_scope ON result_groups FOR SELECT TO aclaim_producer USING ((org_id = ( SELECT aclaim_producer_org() AS aclaim_producer_org)));
