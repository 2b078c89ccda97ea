-- name: ReceiptDeadGroups :many
-- DEAD receipts grouped by consumer and last error, largest group first, with
-- when the group's receipts died (their last update) and the newest few IDs. It
-- finds them through the pginbox_receipts_active partial index, so COMPLETED history
-- does not slow it down. The scope predicate is the one every admin query uses.
SELECT r.consumer,
    coalesce(r.last_error, '')::text AS last_error,
    count(*) AS total,
    min(r.updated_at)::timestamptz AS first_dead_at,
    max(r.updated_at)::timestamptz AS last_dead_at,
    (array_agg(r.id ORDER BY r.id DESC))[1:sqlc.arg(samples)::integer]::uuid[] AS sample_ids
FROM pginbox_receipts r
WHERE r.status = 'DEAD'
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text))
  AND (sqlc.arg(consumer)::text = '' OR r.consumer = sqlc.arg(consumer)::text)
GROUP BY r.consumer, coalesce(r.last_error, '')
ORDER BY total DESC, r.consumer, last_error
LIMIT sqlc.arg(max_count)::integer;
