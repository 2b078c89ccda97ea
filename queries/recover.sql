-- name: ReceiptRecover :many
-- Returns expired leases of the given consumers to RETRYABLE (due now), or DEAD when
-- their attempts are spent. Safe to run from every worker: SKIP LOCKED, no leader.
WITH expired AS (
    SELECT e.id
    FROM pginbox_receipts e
    WHERE e.status = 'PROCESSING'
      AND e.lease_expires_at < now()
      AND e.consumer = ANY (sqlc.arg(consumers)::text[])
    ORDER BY e.lease_expires_at
    LIMIT @max_count
    FOR UPDATE SKIP LOCKED
)
UPDATE pginbox_receipts r
SET status = CASE WHEN r.attempts >= r.max_attempts THEN 'DEAD' ELSE 'RETRYABLE' END,
    last_error = 'lease expired: the worker stopped heartbeating (crash, network loss or overload)',
    claim_token = NULL,
    lease_expires_at = NULL,
    available_at = now(),
    updated_at = now(),
    version = r.version + 1
FROM expired
WHERE r.id = expired.id
RETURNING r.id, r.consumer, r.status;
