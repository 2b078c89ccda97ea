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

-- name: ReceiptReplay :execrows
-- Creates a new PENDING receipt from a COMPLETED original with a payload:
-- same identity, content and fingerprint, linked by replay_of. The identity's
-- unique index covers originals only, so the copy does not collide, and a
-- redelivery of the original message is still a duplicate of the original.
-- A colocated INSERT ... SELECT filtered on @scope_id (the original's): on
-- Citus it runs on the scope's node, which refuses a RETURNING or a second
-- insert in the same statement, so ReceiptReplayQueue adds the queue row and
-- the caller wakes the workers with ReceiptNotify (pg_notify inside a routed
-- statement would run on the worker node, where no one listens). A copy of a
-- receipt with an ordering key goes to the back of its key's queue: the
-- next sequence number, taken under the key's lock (ReceiptKeyLock), and
-- ReceiptQueueKeyed queues it.
INSERT INTO pginbox_receipts (
    id, scope_kind, scope_id, source, consumer, message_id,
    event_type, schema_version, fingerprint, payload, metadata, max_attempts, replay_of,
    ordering_key, ordering_seq
)
SELECT @new_id, o.scope_kind, o.scope_id, o.source, o.consumer, o.message_id,
    o.event_type, o.schema_version, o.fingerprint, o.payload, o.metadata, o.max_attempts, o.id,
    o.ordering_key,
    CASE WHEN o.ordering_key IS NOT NULL THEN (
        SELECT max(p.ordering_seq) + 1
        FROM pginbox_receipts p
        WHERE p.scope_id = sqlc.arg(scope_id)::text
          AND p.consumer = o.consumer AND p.scope_kind = o.scope_kind
          AND p.ordering_key = o.ordering_key)
    END
FROM pginbox_receipts o
WHERE o.scope_id = sqlc.arg(scope_id)::text
  AND o.id = @original_id AND o.status = 'COMPLETED' AND o.payload IS NOT NULL;

-- name: ReceiptReplayQueue :execrows
-- The queue row of the receipt ReceiptReplay created, on the scope's node.
INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts)
SELECT r.id, r.scope_kind, r.scope_id, r.consumer, r.max_attempts
FROM pginbox_receipts r
WHERE r.scope_id = sqlc.arg(scope_id)::text AND r.id = sqlc.arg(id);
