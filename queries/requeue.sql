-- name: ReceiptRequeue :one
-- Gives a DEAD or RETRYABLE receipt, or a PROCESSING one whose lease expired
-- (its worker is gone), a fresh retry budget, due now. Dropping the claim
-- token fences the old worker out. The caller has locked the work row and
-- the receipt (ReceiptGetForUpdate) and checked them, and claims skip a
-- locked work row; the version and status guards stay as a fence. A DEAD
-- receipt's retained row is marked PENDING again. last_error is kept until
-- the next attempt, for the record. Every table reference carries @scope_id
-- (the receipt's), so on Citus it runs on the scope's node; the caller wakes
-- the consumer's workers with ReceiptNotify, a statement of its own that
-- runs where workers listen (the coordinator), at commit.
WITH requeued AS (
    UPDATE pginbox_work w
    SET status = 'PENDING',
        attempts = 0,
        available_at = now(),
        claim_token = NULL,
        lease_expires_at = NULL,
        updated_at = now(),
        version = w.version + 1
    WHERE w.scope_id = sqlc.arg(scope_id)::text
      AND w.receipt_id = sqlc.arg(id)::uuid
      AND w.version = sqlc.arg(expected_version)::bigint
      AND (w.status IN ('DEAD', 'RETRYABLE')
           OR (w.status = 'PROCESSING' AND w.lease_expires_at < now()))
    RETURNING w.receipt_id, w.scope_kind, w.scope_id, w.consumer, w.version
), unsettled AS (
    UPDATE pginbox_receipts r
    SET status = 'PENDING', version = q.version, updated_at = now()
    FROM requeued q
    WHERE r.scope_id = sqlc.arg(scope_id)::text
      AND r.id = q.receipt_id AND r.scope_kind = q.scope_kind AND r.scope_id = q.scope_id
      AND r.status = 'DEAD'
    RETURNING r.id
)
SELECT q.version, q.consumer
FROM requeued q;
