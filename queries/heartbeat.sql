-- name: ReceiptHeartbeat :execrows
-- Extends a lease; zero rows means the lease is gone (recovered or re-claimed).
UPDATE pginbox_receipts
SET lease_expires_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
WHERE id = @id AND claim_token = @claim_token AND status = 'PROCESSING';
