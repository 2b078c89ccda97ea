-- name: ReceiptRelease :execrows
-- Hands back a claim that never reached its handler (shutdown), without spending
-- an attempt, so it does not wait for lease expiry. @scope_id (the receipt's)
-- routes it to one node on Citus.
UPDATE pginbox_work
SET status = CASE WHEN attempts <= 1 THEN 'PENDING' ELSE 'RETRYABLE' END,
    attempts = attempts - 1,
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = now(),
    version = version + 1
-- The token alone fences: only PROCESSING rows have one (a CHECK enforces it).
WHERE scope_id = sqlc.arg(scope_id)::text AND receipt_id = @id AND claim_token = @claim_token;
