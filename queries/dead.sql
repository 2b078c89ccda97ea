-- name: ReceiptDeadGroups :many
-- DEAD receipts grouped by consumer and error shape, largest group first. The
-- shape is the last error with what varies between occurrences of one failure
-- replaced: UUIDs by <uuid>, ULIDs by <ulid>, hex strings of 16 or more
-- characters (hashes, trace IDs) by <hex>, then runs of digits by <n>; so
-- "order 1234 not found" and "order 5678 not found" are one group. Each group
-- has its number of distinct exact texts, when its receipts died (their last
-- update), and its newest few receipts with their exact texts. Grouping here,
-- not in Go, keeps the answer one bounded row per group however many receipts
-- are DEAD. It reads only the queue table, where DEAD receipts wait for an
-- operator, so COMPLETED history does not slow it down. The scope predicate is
-- the one every admin query uses.
WITH dead AS (
    SELECT w.consumer, w.receipt_id, w.updated_at,
        coalesce(w.last_error, '')::text AS last_error
    FROM pginbox_work w
    WHERE w.status = 'DEAD'
      AND (sqlc.arg(all_scopes)::boolean
           OR (w.scope_kind = sqlc.arg(scope_kind)::text AND w.scope_id = sqlc.arg(scope_id)::text))
      AND (sqlc.arg(consumer)::text = '' OR w.consumer = sqlc.arg(consumer)::text)
), shaped AS (
    SELECT d.consumer, d.receipt_id, d.updated_at, d.last_error,
        regexp_replace(regexp_replace(regexp_replace(regexp_replace(d.last_error,
            '[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}', '<uuid>', 'g'),
            '\m[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}\M', '<ulid>', 'g'),
            '\m(?=[0-9]*[A-Fa-f])[0-9A-Fa-f]{16,}\M', '<hex>', 'g'),
            '[0-9]+', '<n>', 'g')::text AS error_shape
    FROM dead d
)
SELECT s.consumer,
    s.error_shape,
    count(*) AS total,
    count(DISTINCT s.last_error) AS texts,
    min(s.updated_at)::timestamptz AS first_dead_at,
    max(s.updated_at)::timestamptz AS last_dead_at,
    (array_agg(s.receipt_id ORDER BY s.receipt_id DESC))[1:sqlc.arg(samples)::integer]::uuid[] AS sample_ids,
    (array_agg(s.last_error ORDER BY s.receipt_id DESC))[1:sqlc.arg(samples)::integer]::text[] AS sample_errors
FROM shaped s
GROUP BY s.consumer, s.error_shape
ORDER BY total DESC, s.consumer, s.error_shape
LIMIT sqlc.arg(max_count)::integer;
