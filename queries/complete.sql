-- name: ReceiptComplete :execrows
-- Runs inside the handler's transaction. Zero rows means the claim was lost, and the
-- caller must roll back the handler's writes with it.
UPDATE pginbox_receipts
SET status = 'COMPLETED',
    claim_token = NULL,
    lease_expires_at = NULL,
    last_error = NULL,
    completed_at = now(),
    updated_at = now(),
    version = version + 1
-- The token alone fences: only PROCESSING rows have one (a CHECK enforces it).
-- Adding "status = 'PROCESSING'" would let the planner scan a partial index of
-- all PROCESSING rows instead of the primary key.
WHERE id = @id AND claim_token = @claim_token;
