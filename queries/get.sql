-- name: ReceiptGet :one
-- One receipt with everything stored for it. Every admin query carries the same
-- scope predicate: @all_scopes for the operator view, otherwise the exact scope,
-- so a tenant view cannot see another tenant's receipt even by ID.
SELECT *
FROM pginbox_receipts r
WHERE r.id = @id
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text));

-- name: ReceiptGetForUpdate :one
-- Locks the receipt for a requeue or replay, so concurrent admin actions on it are
-- serialized and each one checks the version the previous one left.
SELECT id, consumer, status, version, (payload IS NULL)::boolean AS purged, payload_purged_at,
    coalesce(lease_expires_at < now(), false)::boolean AS lease_expired
FROM pginbox_receipts r
WHERE r.id = @id
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text))
FOR UPDATE;

-- name: ReceiptGetForUpdateNoWait :one
-- ReceiptGetForUpdate for a PROCESSING receipt whose lease expired: a running
-- handler's transaction may still hold it, and an admin action must not wait
-- for a handler (SQLSTATE 55P03 instead).
SELECT id, consumer, status, version, (payload IS NULL)::boolean AS purged, payload_purged_at,
    coalesce(lease_expires_at < now(), false)::boolean AS lease_expired
FROM pginbox_receipts r
WHERE r.id = @id
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text))
FOR UPDATE NOWAIT;

-- name: ReceiptState :one
-- A receipt's status and lease, without a lock, so an admin action can tell a
-- receipt a worker holds from one it may change.
SELECT status, coalesce(lease_expires_at < now(), false)::boolean AS lease_expired, lease_expires_at
FROM pginbox_receipts r
WHERE r.id = @id
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text));

-- name: ReceiptListReplays :many
-- The receipts created by replaying @replay_of, oldest first.
SELECT id, status, version, created_at, completed_at
FROM pginbox_receipts r
WHERE r.replay_of = @replay_of
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text))
ORDER BY r.id;
