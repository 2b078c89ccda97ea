-- name: ReceiptRequeue :one
-- Gives a DEAD or RETRYABLE receipt, or a PROCESSING one whose lease expired
-- (its worker is gone), a fresh retry budget, due now. Dropping the claim
-- token fences the old worker out. The caller has
-- locked the row (ReceiptGetForUpdate) and checked it; the version and status
-- guards stay as a fence. The notify wakes listening workers at commit, like
-- accept's. last_error is kept until the next attempt, for the record.
UPDATE pginbox_receipts
SET status = 'PENDING',
    attempts = 0,
    available_at = now(),
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = now(),
    version = version + 1
WHERE id = @id
  AND version = @expected_version
  AND (status IN ('DEAD', 'RETRYABLE')
       OR (status = 'PROCESSING' AND lease_expires_at < now()))
RETURNING version, (pg_notify('pginbox_receipt', consumer) IS NOT NULL)::boolean AS notified;
