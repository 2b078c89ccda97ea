-- name: ReceiptClaim :many
-- Claims up to @max_count due receipts of the given consumers, oldest due first.
-- SKIP LOCKED lets any number of workers claim at once without waiting on each
-- other; every claim gets a fresh token that fences the completion and failure
-- updates. With several consumers a few extra rows may be locked until commit.
-- Payloads are not returned: the handler's transaction loads them
-- (ReceiptStart), so a payload the server cannot produce fails that receipt's
-- attempt alone instead of every claim of its consumer.
WITH due AS (
    -- One ordered index scan per consumer: "consumer = ANY(...) ORDER BY
    -- available_at" would read and sort the whole backlog on every claim.
    SELECT d.id
    FROM unnest(sqlc.arg(consumers)::text[]) AS c (name)
    CROSS JOIN LATERAL (
        SELECT r.id, r.available_at
        FROM pginbox_receipts r
        WHERE r.consumer = c.name
          AND r.status IN ('PENDING', 'RETRYABLE')
          AND r.available_at <= now()
        ORDER BY r.available_at
        LIMIT sqlc.arg(max_count)
        FOR UPDATE SKIP LOCKED
    ) d
    ORDER BY d.available_at
    LIMIT sqlc.arg(max_count)
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
    r.message_id, r.event_type, r.schema_version, r.attempts, r.max_attempts,
    r.created_at;
