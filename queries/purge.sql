-- name: ReceiptPurge :execrows
-- Drops the payloads of up to @max_count COMPLETED receipts completed before
-- @cutoff, oldest first, through the pginbox_receipts_purge partial index (the
-- receipts still holding a payload, in creation order). A receipt completed
-- before the cutoff was created before it, so the scan stops there. One
-- bounded statement per
-- batch keeps locks and WAL bursts short; SKIP LOCKED leaves rows an admin
-- action or a handler holds for the next run. Identity, fingerprint and
-- lineage stay, so redeliveries still deduplicate. The candidates are picked
-- in a CTE, evaluated once: an IN (subquery) may be re-run per row and exceed
-- the limit. The update repeats the scope so that on Citus the one-scope form
-- routes to the scope's node; the all-scopes form locks across shards, which
-- Citus refuses: there Purge lists the scopes with ReceiptPurgeScopes and
-- purges each with the one-scope form.
WITH batch AS (
    SELECT p.id, p.scope_kind, p.scope_id
    FROM pginbox_receipts p
    WHERE p.payload IS NOT NULL
      AND p.created_at < sqlc.arg(cutoff)::timestamptz
      AND p.status = 'COMPLETED'
      AND p.completed_at < sqlc.arg(cutoff)::timestamptz
      AND (sqlc.arg(all_scopes)::boolean
           OR (p.scope_kind = sqlc.arg(scope_kind)::text AND p.scope_id = sqlc.arg(scope_id)::text))
    ORDER BY p.created_at
    LIMIT sqlc.arg(max_count)::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE pginbox_receipts r
SET payload = NULL,
    payload_purged_at = now(),
    updated_at = now(),
    version = r.version + 1
FROM batch
WHERE r.id = batch.id AND r.scope_kind = batch.scope_kind AND r.scope_id = batch.scope_id
  AND (sqlc.arg(all_scopes)::boolean OR r.scope_id = sqlc.arg(scope_id)::text);

-- name: ReceiptPurgeCount :one
-- How many receipts a purge with @cutoff would touch now (for dry runs).
SELECT count(*)
FROM pginbox_receipts p
WHERE p.payload IS NOT NULL
  AND p.created_at < sqlc.arg(cutoff)::timestamptz
  AND p.status = 'COMPLETED'
  AND p.completed_at < sqlc.arg(cutoff)::timestamptz
  AND (sqlc.arg(all_scopes)::boolean
       OR (p.scope_kind = sqlc.arg(scope_kind)::text AND p.scope_id = sqlc.arg(scope_id)::text));

-- name: ReceiptPurgeScopes :many
-- The scopes with receipts a purge with @cutoff would touch now, without a
-- lock: on Citus the operator's purge runs the one-scope ReceiptPurge for
-- each (a lock across shards is refused).
SELECT p.scope_kind, p.scope_id
FROM pginbox_receipts p
WHERE p.payload IS NOT NULL
  AND p.created_at < sqlc.arg(cutoff)::timestamptz
  AND p.status = 'COMPLETED'
  AND p.completed_at < sqlc.arg(cutoff)::timestamptz
GROUP BY p.scope_kind, p.scope_id
ORDER BY p.scope_kind, p.scope_id;
