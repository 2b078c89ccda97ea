-- name: ReceiptClaim :many
-- Claims up to @max_count due receipts of the given consumers, oldest due first.
-- SKIP LOCKED lets any number of workers claim at once without waiting on each
-- other. Only the queue rows change: @claim_token (made by the worker, one per
-- claim) fences the completion and failure updates, together with the ID.
-- Payloads are not returned: the handler's transaction loads them
-- (ReceiptStart), so a payload the server cannot produce fails that receipt's
-- attempt alone instead of every claim of its consumer. With several
-- consumers a few extra rows may be locked until commit.
WITH due AS (
    -- One ordered index scan per consumer: "consumer = ANY(...) ORDER BY
    -- available_at" would read and sort the whole backlog on every claim.
    SELECT d.receipt_id
    FROM unnest(sqlc.arg(consumers)::text[]) AS c (name)
    CROSS JOIN LATERAL (
        SELECT w.receipt_id, w.available_at
        FROM pginbox_work w
        WHERE w.consumer = c.name
          AND w.status IN ('PENDING', 'RETRYABLE')
          AND w.available_at <= now()
        ORDER BY w.available_at
        LIMIT sqlc.arg(max_count)
        FOR UPDATE SKIP LOCKED
    ) d
    ORDER BY d.available_at
    LIMIT sqlc.arg(max_count)
), claimed AS (
    UPDATE pginbox_work w
    SET status = 'PROCESSING',
        claim_token = sqlc.arg(claim_token)::uuid,
        lease_expires_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond',
        attempts = w.attempts + 1,
        version = w.version + 1,
        updated_at = now()
    FROM due
    WHERE w.receipt_id = due.receipt_id
    RETURNING w.receipt_id, w.scope_kind, w.scope_id, w.claim_token, w.attempts, w.max_attempts
)
SELECT r.id, c.claim_token, r.scope_kind, r.scope_id, r.source, r.consumer,
    r.message_id, r.event_type, r.schema_version, c.attempts, c.max_attempts,
    r.created_at
FROM claimed c
JOIN pginbox_receipts r
  ON r.id = c.receipt_id AND r.scope_kind = c.scope_kind AND r.scope_id = c.scope_id;
