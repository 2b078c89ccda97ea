-- name: ReceiptExpiredScopes :many
-- The scopes holding expired leases of the given consumers, at most
-- @max_count: lease recovery then runs ReceiptRecover per scope. It locks
-- nothing and reads the lease index; on Citus it runs on every shard at
-- once (a fan-out by design: no statement can lock rows on several shards).
SELECT DISTINCT e.scope_id
FROM pginbox_work e
WHERE e.status = 'PROCESSING'
  AND e.lease_expires_at < now()
  AND e.consumer = ANY (sqlc.arg(consumers)::text[])
LIMIT sqlc.arg(max_count)::integer;

-- name: ReceiptRecover :many
-- Returns expired leases of the given consumers in scope @scope_id to
-- RETRYABLE (due now), or DEAD when their attempts are spent. Safe to run
-- from every worker: SKIP LOCKED, no leader; a receipt a handler's
-- transaction holds is locked, so it is never taken. Every table reference
-- carries the scope: on Citus it runs on the scope's node.
WITH expired AS (
    SELECT e.receipt_id
    FROM pginbox_work e
    WHERE e.scope_id = sqlc.arg(scope_id)::text
      AND e.status = 'PROCESSING'
      AND e.lease_expires_at < now()
      AND e.consumer = ANY (sqlc.arg(consumers)::text[])
    ORDER BY e.lease_expires_at
    LIMIT @max_count
    FOR UPDATE SKIP LOCKED
), recovered AS (
    UPDATE pginbox_work w
    SET status = CASE WHEN w.attempts >= w.max_attempts THEN 'DEAD' ELSE 'RETRYABLE' END,
        last_error = 'lease expired: the worker stopped heartbeating (crash, network loss or overload)',
        claim_token = NULL,
        lease_expires_at = NULL,
        available_at = now(),
        updated_at = now(),
        version = w.version + 1
    FROM expired
    WHERE w.scope_id = sqlc.arg(scope_id)::text AND w.receipt_id = expired.receipt_id
    RETURNING w.receipt_id, w.scope_kind, w.scope_id, w.consumer, w.status, w.attempts, w.last_error, w.version
), settled AS (
    UPDATE pginbox_receipts r
    SET status = 'DEAD', attempts = v.attempts, last_error = v.last_error,
        version = v.version, updated_at = now()
    FROM recovered v
    WHERE r.scope_id = sqlc.arg(scope_id)::text
      AND r.id = v.receipt_id AND r.scope_kind = v.scope_kind AND r.scope_id = v.scope_id
      AND v.status = 'DEAD'
    RETURNING r.id
)
SELECT v.receipt_id AS id, v.consumer, v.status FROM recovered v;

-- name: ReceiptExpiredScopesLocal :many
-- ReceiptExpiredScopes for a session on a Citus worker node: the scopes of
-- the shards that node holds with expired leases (schema v13).
SELECT DISTINCT e.scope_id::text AS scope_id
FROM pginbox_local_expired_scopes(sqlc.arg(consumers)::text[], sqlc.arg(max_count)::integer) AS e
LIMIT sqlc.arg(max_count)::integer;
