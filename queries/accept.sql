-- name: ReceiptAccept :one
-- Inserts a new receipt and its queue row, or nothing when the identity already
-- exists. With @notify the wake-up rides in the same statement, so a fresh
-- accept is one round trip and one commit; a duplicate writes nothing and
-- notifies nobody.
WITH inserted AS (
    INSERT INTO pginbox_receipts (
        id, scope_kind, scope_id, source, consumer, message_id,
        event_type, schema_version, fingerprint, payload, metadata, max_attempts
    ) VALUES (
        @id, @scope_kind, @scope_id, @source, @consumer, @message_id,
        @event_type, @schema_version, @fingerprint, @payload, @metadata, @max_attempts
    )
    ON CONFLICT (scope_kind, scope_id, source, consumer, message_id) WHERE replay_of IS NULL
    DO NOTHING
    RETURNING id, scope_kind, scope_id, consumer, max_attempts
), queued AS (
    INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts)
    SELECT id, scope_kind, scope_id, consumer, max_attempts FROM inserted
    RETURNING receipt_id, consumer, status
)
SELECT q.receipt_id AS id, q.status,
    CASE WHEN sqlc.arg(notify)::boolean
         THEN pg_notify('pginbox_receipt', q.consumer) IS NOT NULL
         ELSE false END AS notified
FROM queued q;

-- name: ReceiptByIdentity :one
-- The original receipt of an identity (replays share it but are not originals)
-- with its live status.
SELECT r.id, coalesce(w.status, r.status)::text AS status, r.fingerprint
FROM pginbox_receipts r
LEFT JOIN pginbox_work w
  ON w.receipt_id = r.id AND w.scope_kind = r.scope_kind AND w.scope_id = r.scope_id
WHERE r.scope_kind = @scope_kind
  AND r.scope_id = @scope_id
  AND r.source = @source
  AND r.consumer = @consumer
  AND r.message_id = @message_id
  AND r.replay_of IS NULL;

-- name: ReceiptNotify :exec
-- Wakes the workers of the given consumers at once (coalesced wake-ups).
SELECT pg_notify('pginbox_receipt', c.name)
FROM unnest(sqlc.arg(consumers)::text[]) AS c (name);

-- name: ReceiptAcceptRouted :one
-- Accept on Citus: pginbox_accept (schema v10) inserts the receipt and its
-- queue row, none for an identity that exists. Outside a transaction Citus
-- hands the call to the scope's node, which runs both inserts and commits
-- there; in a transaction each insert is routed to that node.
SELECT w.receipt_id AS id, w.status
FROM pginbox_accept(
    @id, @scope_kind, @scope_id, @source, @consumer, @message_id,
    @event_type, @schema_version, @fingerprint, @payload, @metadata, @max_attempts
) w;

-- name: ReceiptInsertRouted :exec
-- The receipt alone, INSERT ... VALUES with the scope, so on Citus it runs on
-- the scope's node only: the batch accept there sends one per message.
INSERT INTO pginbox_receipts (
    id, scope_kind, scope_id, source, consumer, message_id,
    event_type, schema_version, fingerprint, payload, metadata, max_attempts
) VALUES (
    @id, @scope_kind, @scope_id, @source, @consumer, @message_id,
    @event_type, @schema_version, @fingerprint, @payload, @metadata, @max_attempts
)
ON CONFLICT (scope_kind, scope_id, source, consumer, message_id) WHERE replay_of IS NULL
DO NOTHING;
