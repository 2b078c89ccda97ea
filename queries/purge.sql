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
-- the limit.
WITH batch AS (
    SELECT p.id
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
WHERE r.id = batch.id;

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
