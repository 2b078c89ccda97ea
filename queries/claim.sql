-- name: ReceiptClaim :many
-- Claims up to @max_count due receipts of the given consumers. SKIP LOCKED lets any
-- number of workers claim at once without waiting on each other; every claim gets a
-- fresh token that fences the completion and failure updates.
WITH due AS (
    SELECT d.id
    FROM pginbox_receipts d
    WHERE d.status IN ('PENDING', 'RETRYABLE')
      AND d.available_at <= now()
      AND d.consumer = ANY (sqlc.arg(consumers)::text[])
    ORDER BY d.available_at
    LIMIT @max_count
    FOR UPDATE SKIP LOCKED
)
UPDATE pginbox_receipts r
SET status = 'PROCESSING',
    claim_token = gen_random_uuid(),
    lease_expires_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond',
    attempts = r.attempts + 1,
    version = r.version + 1,
    updated_at = now()
FROM due
WHERE r.id = due.id
RETURNING r.id, r.claim_token, r.scope_kind, r.scope_id, r.source, r.consumer,
    r.message_id, r.event_type, r.schema_version, r.payload, r.metadata,
    r.attempts, r.max_attempts, r.created_at;
