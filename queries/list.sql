-- name: ReceiptList :many
-- One page of receipts in ID order (ULIDs sort by creation time), after the
-- @after cursor. Payloads and metadata are left out (ReceiptGet has them), but the
-- columns match ReceiptGet's, so one mapping serves both. Empty
-- filters match everything; callers fetch one row more than they show to know
-- whether another page exists.
SELECT id, scope_kind, scope_id, source, consumer, message_id, event_type,
    schema_version, fingerprint, NULL::json AS payload, '{}'::jsonb AS metadata, status,
    attempts, max_attempts, available_at, claim_token, lease_expires_at, last_error,
    created_at, updated_at, completed_at, version, replay_of, payload_purged_at,
    ordering_key, ordering_seq, blocked
FROM pginbox_receipts_live r
WHERE (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text))
  AND (sqlc.narg(after)::uuid IS NULL OR r.id > sqlc.narg(after)::uuid)
  AND (cardinality(sqlc.arg(statuses)::text[]) = 0 OR r.status = ANY (sqlc.arg(statuses)::text[]))
  AND (sqlc.arg(consumer)::text = '' OR r.consumer = sqlc.arg(consumer)::text)
  AND (sqlc.arg(source)::text = '' OR r.source = sqlc.arg(source)::text)
  AND (sqlc.narg(created_after)::timestamptz IS NULL OR r.created_at >= sqlc.narg(created_after)::timestamptz)
  AND (sqlc.narg(created_before)::timestamptz IS NULL OR r.created_at < sqlc.narg(created_before)::timestamptz)
ORDER BY r.id
LIMIT sqlc.arg(max_count)::integer;
