-- name: ReceiptFail :one
-- Records a failed attempt after the handler's transaction rolled back: DEAD when
-- @dead is set or the attempts are spent, otherwise RETRYABLE after @delay_ms.
UPDATE pginbox_receipts
SET status = CASE WHEN sqlc.arg(dead)::boolean OR attempts >= max_attempts
                  THEN 'DEAD' ELSE 'RETRYABLE' END,
    available_at = now() + sqlc.arg(delay_ms)::bigint * interval '1 millisecond',
    last_error = sqlc.arg(last_error)::text,
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = now(),
    version = version + 1
-- The token alone fences: only PROCESSING rows have one (a CHECK enforces it).
-- Adding "status = 'PROCESSING'" would let the planner scan a partial index of
-- all PROCESSING rows instead of the primary key.
WHERE id = @id AND claim_token = @claim_token
RETURNING status, available_at;
