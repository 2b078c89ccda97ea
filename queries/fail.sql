-- name: ReceiptFail :one
-- Records a failed attempt after the handler's transaction rolled back: DEAD when
-- @dead is set or the attempts are spent, otherwise RETRYABLE after @delay_ms.
-- A DEAD receipt is marked so on its retained row too. Every table reference
-- carries @scope_id (the receipt's): on Citus the statement runs on the
-- scope's node alone.
WITH failed AS (
    UPDATE pginbox_work
    SET status = CASE WHEN sqlc.arg(dead)::boolean OR attempts >= max_attempts
                      THEN 'DEAD' ELSE 'RETRYABLE' END,
        available_at = now() + sqlc.arg(delay_ms)::bigint * interval '1 millisecond',
        last_error = sqlc.arg(last_error)::text,
        claim_token = NULL,
        lease_expires_at = NULL,
        updated_at = now(),
        version = version + 1
    -- The token alone fences: only PROCESSING rows have one (a CHECK enforces it).
    WHERE scope_id = sqlc.arg(scope_id)::text AND receipt_id = @id AND claim_token = @claim_token
    RETURNING receipt_id, scope_kind, scope_id, status, available_at, attempts, last_error, version
), settled AS (
    UPDATE pginbox_receipts r
    SET status = 'DEAD', attempts = f.attempts, last_error = f.last_error,
        version = f.version, updated_at = now()
    FROM failed f
    WHERE r.scope_id = sqlc.arg(scope_id)::text
      AND r.id = f.receipt_id AND r.scope_kind = f.scope_kind AND r.scope_id = f.scope_id
      AND f.status = 'DEAD'
    RETURNING r.id
)
SELECT f.status, f.available_at FROM failed f;
