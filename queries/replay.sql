-- name: ReceiptVersionBump :one
-- Moves a locked receipt to the next version without changing anything else. A
-- replay bumps its original this way, so concurrent replays that read the same
-- version cannot both succeed. @scope_id (the receipt's) routes it to one
-- node on Citus.
UPDATE pginbox_receipts
SET version = version + 1,
    updated_at = now()
WHERE scope_id = sqlc.arg(scope_id)::text AND id = @id AND version = @expected_version
RETURNING version;

-- name: ReceiptReplay :one
-- Creates a new PENDING receipt (and its queue row) from a COMPLETED original
-- with a payload: same identity, content and fingerprint, linked by replay_of.
-- The identity's unique index covers originals only, so the copy does not
-- collide, and a redelivery of the original message is still a duplicate of the
-- original.
WITH created AS (
    INSERT INTO pginbox_receipts (
        id, scope_kind, scope_id, source, consumer, message_id,
        event_type, schema_version, fingerprint, payload, metadata, max_attempts, replay_of
    )
    SELECT @new_id, o.scope_kind, o.scope_id, o.source, o.consumer, o.message_id,
        o.event_type, o.schema_version, o.fingerprint, o.payload, o.metadata, o.max_attempts, o.id
    FROM pginbox_receipts o
    WHERE o.id = @original_id AND o.status = 'COMPLETED' AND o.payload IS NOT NULL
    RETURNING id, scope_kind, scope_id, consumer, max_attempts
), queued AS (
    INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts)
    SELECT id, scope_kind, scope_id, consumer, max_attempts FROM created
    RETURNING receipt_id, consumer, status, version
)
SELECT q.receipt_id AS id, q.status, q.version,
    (pg_notify('pginbox_receipt', q.consumer) IS NOT NULL)::boolean AS notified
FROM queued q;
