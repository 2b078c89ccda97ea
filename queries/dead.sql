-- name: ReceiptDeadGroups :many
-- DEAD receipts grouped by consumer and last error, largest group first, with
-- when the group's receipts died (their last update) and the newest few IDs. It
-- reads only the queue table, where DEAD receipts wait for an operator, so
-- COMPLETED history does not slow it down. The scope predicate is the one
-- every admin query uses.
SELECT w.consumer,
    coalesce(w.last_error, '')::text AS last_error,
    count(*) AS total,
    min(w.updated_at)::timestamptz AS first_dead_at,
    max(w.updated_at)::timestamptz AS last_dead_at,
    (array_agg(w.receipt_id ORDER BY w.receipt_id DESC))[1:sqlc.arg(samples)::integer]::uuid[] AS sample_ids
FROM pginbox_work w
WHERE w.status = 'DEAD'
  AND (sqlc.arg(all_scopes)::boolean
       OR (w.scope_kind = sqlc.arg(scope_kind)::text AND w.scope_id = sqlc.arg(scope_id)::text))
  AND (sqlc.arg(consumer)::text = '' OR w.consumer = sqlc.arg(consumer)::text)
GROUP BY w.consumer, coalesce(w.last_error, '')
ORDER BY total DESC, w.consumer, last_error
LIMIT sqlc.arg(max_count)::integer;
