-- name: ReceiptAccept :one
-- Inserts a new PENDING receipt, or nothing when the identity already exists. With
-- @notify the wake-up rides in the same statement, so a fresh accept is one round
-- trip and one commit; a duplicate writes nothing and notifies nobody.
INSERT INTO pginbox_receipts (
    id, scope_kind, scope_id, source, consumer, message_id,
    event_type, schema_version, fingerprint, payload, metadata, max_attempts
) VALUES (
    @id, @scope_kind, @scope_id, @source, @consumer, @message_id,
    @event_type, @schema_version, @fingerprint, @payload, @metadata, @max_attempts
)
ON CONFLICT (scope_kind, scope_id, source, consumer, message_id) WHERE replay_of IS NULL
DO NOTHING
RETURNING id, status,
    CASE WHEN sqlc.arg(notify)::boolean
         THEN pg_notify('pginbox_receipt', consumer) IS NOT NULL
         ELSE false END AS notified;

-- name: ReceiptByIdentity :one
-- The original receipt of an identity (replays share it but are not originals).
SELECT id, status, fingerprint
FROM pginbox_receipts
WHERE scope_kind = @scope_kind
  AND scope_id = @scope_id
  AND source = @source
  AND consumer = @consumer
  AND message_id = @message_id
  AND replay_of IS NULL;

-- name: ReceiptNotify :exec
-- Wakes the workers of the given consumers at once (coalesced wake-ups).
SELECT pg_notify('pginbox_receipt', c.name)
FROM unnest(sqlc.arg(consumers)::text[]) AS c (name);
