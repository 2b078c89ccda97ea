-- name: ReceiptHeartbeat :many
-- Extends the leases of every receipt a worker holds in one statement and returns
-- the IDs whose claim is gone (recovered or re-claimed elsewhere). A matching
-- token means PROCESSING (a CHECK ties them). A row locked by a handler's
-- transaction (running, or completing) is skipped, not waited for. IDs travel
-- as text so the statement works under the simple protocol too.
WITH held AS (
    -- Set-returning functions in one select list advance in lockstep, zipping
    -- the arrays (sqlc cannot analyze the multi-argument unnest).
    SELECT unnest(sqlc.arg(ids)::text[])::uuid AS id,
           unnest(sqlc.arg(tokens)::text[])::uuid AS token
), extended AS (
    UPDATE pginbox_work w
    SET lease_expires_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
    FROM (
        SELECT l.receipt_id
        FROM pginbox_work l
        JOIN held ON l.receipt_id = held.id AND l.claim_token = held.token
        FOR UPDATE OF l SKIP LOCKED
    ) AS owned
    WHERE w.receipt_id = owned.receipt_id
    RETURNING w.receipt_id
)
SELECT held.id AS lost_id
FROM held
WHERE NOT EXISTS (
    SELECT 1
    FROM pginbox_work w
    WHERE w.receipt_id = held.id AND w.claim_token = held.token
);
