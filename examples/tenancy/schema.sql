-- The example's business table, under row-level security keyed on pginbox's
-- tenant setting: a transaction sees and writes only the rows of the tenant
-- pginbox (or inbox.ApplyScope) set for it. Applied by the tables' owner.

CREATE TABLE tenancy_orders (
    tenant_id   text   NOT NULL,
    order_id    text   NOT NULL,
    total_cents bigint NOT NULL,
    PRIMARY KEY (tenant_id, order_id)
);

ALTER TABLE tenancy_orders ENABLE ROW LEVEL SECURITY;
-- The owner is held to the policy too.
ALTER TABLE tenancy_orders FORCE ROW LEVEL SECURITY;

-- current_setting(..., true) is NULL where no scope was applied: no rows.
CREATE POLICY tenancy_orders_tenant ON tenancy_orders
    USING (tenant_id = current_setting('pginbox.tenant', true))
    WITH CHECK (tenant_id = current_setting('pginbox.tenant', true));
