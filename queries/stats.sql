-- name: ReceiptStats :many
-- Counts of the active (not COMPLETED) receipts per consumer and status, and the
-- due ones' count and oldest available_at. It reads only the queue table, so it
-- does not slow down as COMPLETED history grows.
SELECT consumer,
    status,
    count(*) AS total,
    count(*) FILTER (WHERE status IN ('PENDING', 'RETRYABLE') AND available_at <= now()) AS due,
    coalesce((extract(epoch FROM now() - min(available_at)
        FILTER (WHERE status IN ('PENDING', 'RETRYABLE') AND available_at <= now())) * 1000)::bigint, 0)::bigint AS oldest_due_ms
FROM pginbox_work w
WHERE (sqlc.arg(all_scopes)::boolean
       OR (w.scope_kind = sqlc.arg(scope_kind)::text AND w.scope_id = sqlc.arg(scope_id)::text))
GROUP BY consumer, status
ORDER BY consumer, status;

-- name: ReceiptStatsCompleted :many
-- COMPLETED receipts per consumer. This scans the retained history, so it is
-- opt-in.
SELECT consumer, count(*) AS total
FROM pginbox_receipts r
WHERE r.status = 'COMPLETED'
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text))
GROUP BY consumer
ORDER BY consumer;
