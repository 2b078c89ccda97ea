-- name: ReceiptHeartbeat :many
-- Extends the leases of the receipts of one scope (@scope_id) a worker holds
-- in one statement and returns the IDs whose claim is gone (recovered or
-- re-claimed elsewhere); the worker sends one per scope it holds, so on Citus
-- each runs on its scope's node. A matching token means PROCESSING (a CHECK
-- ties them). A row locked by a handler's transaction (running, or
-- completing) is skipped, not waited for. Each ID's token is the one at its
-- position (WITH ORDINALITY: Citus refuses the zipping set-returning
-- functions of one select list); IDs travel as text so the statement works
-- under the simple protocol too.
WITH extended AS (
    UPDATE pginbox_work w
    SET lease_expires_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
    FROM (
        SELECT l.receipt_id
        FROM pginbox_work l
        JOIN unnest(sqlc.arg(ids)::text[]) WITH ORDINALITY AS held (id, n)
          ON l.receipt_id = held.id::uuid AND l.claim_token = (sqlc.arg(tokens)::text[])[held.n]::uuid
        WHERE l.scope_id = sqlc.arg(scope_id)::text
        FOR UPDATE OF l SKIP LOCKED
    ) AS owned
    WHERE w.scope_id = sqlc.arg(scope_id)::text AND w.receipt_id = owned.receipt_id
    RETURNING w.receipt_id
)
SELECT held.id::uuid AS lost_id
FROM unnest(sqlc.arg(ids)::text[]) WITH ORDINALITY AS held (id, n)
WHERE NOT EXISTS (
    SELECT 1
    FROM pginbox_work w
    WHERE w.scope_id = sqlc.arg(scope_id)::text
      AND w.receipt_id = held.id::uuid AND w.claim_token = (sqlc.arg(tokens)::text[])[held.n]::uuid
);
