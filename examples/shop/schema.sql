-- The shop's own business tables. pginbox's tables come from its goose
-- migrations; sqlc only needs these to type the queries.

CREATE TABLE shop_orders (
    tenant_id   text   NOT NULL,
    order_id    text   NOT NULL,
    customer_id text   NOT NULL,
    total_cents bigint NOT NULL,
    currency    text   NOT NULL,
    status      text   NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'cancelled')),
    PRIMARY KEY (tenant_id, order_id)
);

CREATE TABLE shop_invoices (
    tenant_id    text   NOT NULL,
    order_id     text   NOT NULL,
    amount_cents bigint NOT NULL,
    currency     text   NOT NULL,
    PRIMARY KEY (tenant_id, order_id)
);
