-- name: ReceiptGet :one
-- One receipt with everything stored for it, its live state from its queue row
-- (pginbox_receipts_live joins them). Every admin query carries the same scope
-- predicate: @all_scopes for the operator view, otherwise the exact scope, so a
-- tenant view cannot see another tenant's receipt even by ID.
SELECT *
FROM pginbox_receipts_live r
WHERE r.id = @id
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text));

-- name: ReceiptGetForUpdate :one
-- Locks a receipt for a requeue or replay: its work row first (the row claims,
-- recovery and completions change, taken in the order they take it), then
-- the receipt. Concurrent admin actions are serialized and each one checks
-- the version the previous one left; a claim skips the locked work row, and
-- one that took it first is waited for, so its version is what is checked.
WITH w AS MATERIALIZED (
    SELECT w.receipt_id, w.scope_kind, w.scope_id, w.status, w.version, w.lease_expires_at
    FROM pginbox_work w
    WHERE w.receipt_id = @id
      AND (sqlc.arg(all_scopes)::boolean
           OR (w.scope_kind = sqlc.arg(scope_kind)::text AND w.scope_id = sqlc.arg(scope_id)::text))
    FOR UPDATE
)
SELECT r.id, r.scope_kind, r.scope_id, r.consumer, coalesce(w.status, r.status)::text AS status,
    coalesce(w.version, r.version)::bigint AS version,
    (r.payload IS NULL)::boolean AS purged, r.payload_purged_at,
    coalesce(w.lease_expires_at < now(), false)::boolean AS lease_expired,
    r.ordering_key
FROM pginbox_receipts r
LEFT JOIN w ON w.receipt_id = r.id AND w.scope_kind = r.scope_kind AND w.scope_id = r.scope_id
WHERE r.id = @id
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text))
FOR UPDATE OF r;

-- name: ReceiptGetForUpdateNoWait :one
-- ReceiptGetForUpdate for a PROCESSING receipt whose lease expired: a running
-- handler's transaction may still hold it, and an admin action must not wait
-- for a handler (SQLSTATE 55P03 instead).
WITH w AS MATERIALIZED (
    SELECT w.receipt_id, w.scope_kind, w.scope_id, w.status, w.version, w.lease_expires_at
    FROM pginbox_work w
    WHERE w.receipt_id = @id
      AND (sqlc.arg(all_scopes)::boolean
           OR (w.scope_kind = sqlc.arg(scope_kind)::text AND w.scope_id = sqlc.arg(scope_id)::text))
    FOR UPDATE NOWAIT
)
SELECT r.id, r.scope_kind, r.scope_id, r.consumer, coalesce(w.status, r.status)::text AS status,
    coalesce(w.version, r.version)::bigint AS version,
    (r.payload IS NULL)::boolean AS purged, r.payload_purged_at,
    coalesce(w.lease_expires_at < now(), false)::boolean AS lease_expired,
    r.ordering_key
FROM pginbox_receipts r
LEFT JOIN w ON w.receipt_id = r.id AND w.scope_kind = r.scope_kind AND w.scope_id = r.scope_id
WHERE r.id = @id
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text))
FOR UPDATE OF r NOWAIT;

-- name: ReceiptState :one
-- A receipt's status and lease, without a lock, so an admin action can tell a
-- receipt a worker holds from one it may change, and its scope, which never
-- changes: the action then locks it with the scoped ReceiptGetForUpdate (on
-- Citus the all-scopes form would lock across shards, which Citus refuses).
SELECT r.scope_kind, r.scope_id, coalesce(w.status, r.status)::text AS status,
    coalesce(w.lease_expires_at < now(), false)::boolean AS lease_expired, w.lease_expires_at
FROM pginbox_receipts r
LEFT JOIN pginbox_work w
  ON w.receipt_id = r.id AND w.scope_kind = r.scope_kind AND w.scope_id = r.scope_id
WHERE r.id = @id
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text));

-- name: ReceiptListReplays :many
-- The receipts created by replaying @replay_of, oldest first.
SELECT id, status, version, created_at, completed_at
FROM pginbox_receipts_live r
WHERE r.replay_of = @replay_of
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text))
ORDER BY r.id;
