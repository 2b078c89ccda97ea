-- name: InsertOrder :exec
INSERT INTO shop_orders (tenant_id, order_id, customer_id, total_cents, currency)
VALUES (@tenant_id, @order_id, @customer_id, @total_cents, @currency);

-- name: CancelOrder :execrows
UPDATE shop_orders SET status = 'cancelled'
WHERE tenant_id = @tenant_id AND order_id = @order_id;

-- name: InsertInvoice :exec
INSERT INTO shop_invoices (tenant_id, order_id, amount_cents, currency)
VALUES (@tenant_id, @order_id, @amount_cents, @currency);

-- name: ListOrders :many
SELECT * FROM shop_orders ORDER BY tenant_id, order_id;

-- name: ListInvoices :many
SELECT * FROM shop_invoices ORDER BY tenant_id, order_id;
