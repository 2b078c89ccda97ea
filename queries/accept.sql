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

-- name: ReceiptInsertRouted :exec
-- Accept on Citus, step 1: the receipt alone, INSERT ... VALUES with the
-- scope, so it runs on the scope's node only. It runs in one transaction
-- with ReceiptQueueRouted (and ReceiptNotify for the wake-up, on the
-- coordinator), sent as one pipeline: one round trip, one commit on one node.
INSERT INTO pginbox_receipts (
    id, scope_kind, scope_id, source, consumer, message_id,
    event_type, schema_version, fingerprint, payload, metadata, max_attempts
) VALUES (
    @id, @scope_kind, @scope_id, @source, @consumer, @message_id,
    @event_type, @schema_version, @fingerprint, @payload, @metadata, @max_attempts
)
ON CONFLICT (scope_kind, scope_id, source, consumer, message_id) WHERE replay_of IS NULL
DO NOTHING;

-- name: ReceiptQueueRouted :exec
-- Accept on Citus, step 2: the queue row of the receipt step 1 inserted,
-- none when the identity existed (its new ID was not inserted). A colocated
-- INSERT ... SELECT filtered on the scope: it runs on the scope's node.
-- (Citus refuses a RETURNING here: ReceiptQueuedRouted reads the row.)
INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts)
SELECT r.id, r.scope_kind, r.scope_id, r.consumer, r.max_attempts
FROM pginbox_receipts r
WHERE r.scope_id = sqlc.arg(scope_id)::text AND r.id = sqlc.arg(id);

-- name: ReceiptQueuedRouted :many
-- Accept on Citus, step 3: the queue row step 2 inserted, none for an
-- identity that existed.
SELECT w.receipt_id AS id, w.status
FROM pginbox_work w
WHERE w.scope_id = sqlc.arg(scope_id)::text AND w.receipt_id = sqlc.arg(id);
