-- name: ReceiptDueScopes :many
-- The claim on Citus, step 1: the scopes with due receipts of the given
-- consumers, oldest due first, at most @max_scopes. It runs on every shard
-- at once (one task per shard, on the due index) and locks nothing; the
-- worker then claims from each scope with ReceiptClaimScope. A fan-out by
-- design: no statement can lock rows on several shards.
SELECT w.scope_kind, w.scope_id, min(w.available_at)::timestamptz AS oldest_due
FROM pginbox_work w
WHERE w.consumer = ANY (sqlc.arg(consumers)::text[])
  AND w.status IN ('PENDING', 'RETRYABLE')
  AND w.available_at <= now()
GROUP BY w.scope_kind, w.scope_id
ORDER BY oldest_due, w.scope_id
LIMIT sqlc.arg(max_scopes)::integer;

-- name: ReceiptClaimScope :many
-- The claim on Citus, step 2: ReceiptClaim for one scope, @scope_id. Every
-- table reference carries the scope, so the statement runs on the scope's
-- node alone and SKIP LOCKED works as on one server.
WITH due AS (
    SELECT d.receipt_id
    FROM unnest(sqlc.arg(consumers)::text[]) AS c (name)
    CROSS JOIN LATERAL (
        SELECT w.receipt_id, w.available_at
        FROM pginbox_work w
        WHERE w.scope_id = sqlc.arg(scope_id)::text
          AND w.consumer = c.name
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
    WHERE w.scope_id = sqlc.arg(scope_id)::text AND w.receipt_id = due.receipt_id
    RETURNING w.receipt_id, w.scope_kind, w.scope_id, w.claim_token, w.attempts, w.max_attempts
)
SELECT r.id, c.claim_token, r.scope_kind, r.scope_id, r.source, r.consumer,
    r.message_id, r.event_type, r.schema_version, c.attempts, c.max_attempts,
    r.created_at
FROM claimed c
JOIN pginbox_receipts r
  ON r.scope_id = sqlc.arg(scope_id)::text
 AND r.id = c.receipt_id AND r.scope_kind = c.scope_kind AND r.scope_id = c.scope_id;

-- name: ReceiptDueScopesLocal :many
-- ReceiptDueScopes for a session on a Citus worker node: the scopes with
-- due work on the shards that node holds (pginbox_local_due_scopes, schema
-- v13), oldest due first. It reads that node alone, one descent of the due
-- index per scope with work, so a node down hides no other node's scopes
-- and its cost does not grow with the due rows.
SELECT d.scope_kind::text AS scope_kind, d.scope_id::text AS scope_id,
    d.oldest_due::timestamptz AS oldest_due
FROM pginbox_local_due_scopes(sqlc.arg(consumers)::text[], sqlc.arg(max_scopes)::integer) AS d
ORDER BY d.oldest_due, d.scope_id
LIMIT sqlc.arg(max_scopes)::integer;
