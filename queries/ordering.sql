-- name: ReceiptKeyLock :exec
-- Takes the transaction-level advisory locks of ordering keys (class
-- 1885825379, "pgic": the outbox's key locks use "pgib") before the
-- statement that decides on them: accept (the next sequence number, BLOCKED
-- or PENDING) and promotion (the next receipt of a key). Under READ
-- COMMITTED that statement's snapshot is taken after the lock is held, so it
-- sees what the other side committed. @keys are the lock names the caller
-- built (consumer, scope and key), all of scope @scope_id; they are locked
-- in hash order, so two transactions locking several keys cannot deadlock.
-- The one-row read of an ID that never exists carries the scope: on Citus
-- the statement is routed to the scope's node and the locks are held by the
-- transaction's connection there, as the outbox's OutboxKeyLockScope does.
SELECT count(l.locked)::bigint AS locked
FROM (
    SELECT pg_advisory_xact_lock(1885825379, k.h) IS NOT NULL AS locked
    FROM (
        SELECT DISTINCT hashtext(n.name) AS h
        FROM unnest(sqlc.arg(keys)::text[]) AS n (name)
        ORDER BY 1
        OFFSET 0
    ) k
    CROSS JOIN (
        SELECT count(*)
        FROM pginbox_receipts r
        WHERE r.scope_id = sqlc.arg(scope_id)::text
          AND r.id = '00000000-0000-0000-0000-000000000000'
    ) AS one_row
) l;

-- name: ReceiptInsertKeyed :execrows
-- Accept of a message with an ordering key, step 1, after ReceiptKeyLock:
-- the receipt with the next sequence number of its (consumer, scope, key),
-- or nothing when the identity exists (a redelivery gets no new number).
-- One statement on one server; Citus would pull it through the
-- coordinator, so there ReceiptInsertKeyedRouted and ReceiptSeqKeyedRouted
-- do it in two.
INSERT INTO pginbox_receipts (
    id, scope_kind, scope_id, source, consumer, message_id,
    event_type, schema_version, fingerprint, payload, metadata, max_attempts,
    ordering_key, ordering_seq
)
SELECT sqlc.arg(id)::uuid, sqlc.arg(scope_kind)::text, sqlc.arg(scope_id)::text,
    sqlc.arg(source)::text, sqlc.arg(consumer)::text, sqlc.arg(message_id)::text,
    sqlc.arg(event_type)::text, sqlc.arg(schema_version)::integer, sqlc.arg(fingerprint)::bytea,
    sqlc.arg(payload)::text::json, sqlc.arg(metadata)::text::jsonb, sqlc.arg(max_attempts)::integer,
    sqlc.arg(ordering_key)::text, coalesce(max(p.ordering_seq), 0) + 1
FROM pginbox_receipts p
WHERE p.scope_id = sqlc.arg(scope_id)::text
  AND p.consumer = sqlc.arg(consumer)::text
  AND p.scope_kind = sqlc.arg(scope_kind)::text
  AND p.ordering_key = sqlc.arg(ordering_key)::text
ON CONFLICT (scope_kind, scope_id, source, consumer, message_id) WHERE replay_of IS NULL
DO NOTHING;

-- name: ReceiptInsertKeyedRouted :exec
-- ReceiptInsertKeyed on Citus, step 1: the receipt alone, INSERT ... VALUES
-- with the scope, so it runs on the scope's node (Citus pulls an INSERT ...
-- SELECT whose scope is a parameter through the coordinator).
-- ReceiptSeqKeyedRouted then numbers it.
INSERT INTO pginbox_receipts (
    id, scope_kind, scope_id, source, consumer, message_id,
    event_type, schema_version, fingerprint, payload, metadata, max_attempts, ordering_key
) VALUES (
    sqlc.arg(id)::uuid, sqlc.arg(scope_kind)::text, sqlc.arg(scope_id)::text,
    sqlc.arg(source)::text, sqlc.arg(consumer)::text, sqlc.arg(message_id)::text,
    sqlc.arg(event_type)::text, sqlc.arg(schema_version)::integer, sqlc.arg(fingerprint)::bytea,
    sqlc.arg(payload)::text::json, sqlc.arg(metadata)::text::jsonb, sqlc.arg(max_attempts)::integer,
    sqlc.arg(ordering_key)::text
)
ON CONFLICT (scope_kind, scope_id, source, consumer, message_id) WHERE replay_of IS NULL
DO NOTHING;

-- name: ReceiptSeqKeyedRouted :exec
-- ReceiptInsertKeyed on Citus, step 2: the receipt step 1 inserted (none
-- when the identity existed) gets the next sequence number of its key.
UPDATE pginbox_receipts r
SET ordering_seq = (
    SELECT coalesce(max(p.ordering_seq), 0) + 1
    FROM pginbox_receipts p
    WHERE p.scope_id = sqlc.arg(scope_id)::text
      AND p.consumer = r.consumer AND p.scope_kind = r.scope_kind
      AND p.ordering_key = r.ordering_key)
WHERE r.scope_id = sqlc.arg(scope_id)::text AND r.id = sqlc.arg(id)::uuid
  AND r.ordering_key IS NOT NULL AND r.ordering_seq IS NULL;

-- name: ReceiptQueueKeyed :execrows
-- Accept (or replay) of a receipt with an ordering key, step 2: its queue
-- row, BLOCKED while a work row of its key exists (an earlier receipt that
-- is unfinished or DEAD), else PENDING. None when step 1 inserted nothing.
INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts, ordering_key, ordering_seq, status)
SELECT r.id, r.scope_kind, r.scope_id, r.consumer, r.max_attempts, r.ordering_key, r.ordering_seq,
    CASE WHEN EXISTS (
        SELECT 1 FROM pginbox_work w
        WHERE w.scope_id = sqlc.arg(scope_id)::text
          AND w.consumer = r.consumer AND w.scope_kind = r.scope_kind
          AND w.ordering_key = r.ordering_key)
    THEN 'BLOCKED' ELSE 'PENDING' END
FROM pginbox_receipts r
WHERE r.scope_id = sqlc.arg(scope_id)::text AND r.id = sqlc.arg(id)::uuid
  AND r.ordering_key IS NOT NULL;

-- name: ReceiptPromote :many
-- After ReceiptKeyLock, in the transaction that removed a key's head (a
-- completion, a skip): the key's next receipt, its lowest sequence number,
-- becomes PENDING, due now, if it is BLOCKED. A key whose first work row is
-- not BLOCKED still has its head (DEAD, or running) and keeps waiting. The
-- keys are @keys of consumers @consumers (at the same positions), of one
-- scope. Returns the consumers of the promoted receipts, to wake.
UPDATE pginbox_work w
SET status = 'PENDING', available_at = now(), updated_at = now(), version = w.version + 1
FROM (
    SELECT h.receipt_id
    FROM unnest(sqlc.arg(consumers)::text[]) WITH ORDINALITY AS k (consumer, n)
    CROSS JOIN LATERAL (
        SELECT x.receipt_id, x.status
        FROM pginbox_work x
        WHERE x.scope_id = sqlc.arg(scope_id)::text
          AND x.consumer = k.consumer
          AND x.scope_kind = sqlc.arg(scope_kind)::text
          AND x.ordering_key = (sqlc.arg(keys)::text[])[k.n]
        ORDER BY x.ordering_seq
        LIMIT 1
    ) h
    WHERE h.status = 'BLOCKED'
) nxt
WHERE w.scope_id = sqlc.arg(scope_id)::text AND w.receipt_id = nxt.receipt_id
  AND w.status = 'BLOCKED'
RETURNING w.consumer;

-- name: ReceiptSkip :one
-- Takes a DEAD receipt out of its key's order: its work row keeps its DEAD
-- state (it can still be requeued, then without order) and loses the key,
-- so the key's next receipt may run (ReceiptPromote, in the same
-- transaction). The caller has locked and checked the receipt
-- (ReceiptGetForUpdate); no row when it is not DEAD with a key.
UPDATE pginbox_work w
SET ordering_key = NULL, updated_at = now(), version = w.version + 1
FROM pginbox_receipts r
WHERE w.scope_id = sqlc.arg(scope_id)::text
  AND w.receipt_id = sqlc.arg(id)::uuid
  AND w.version = sqlc.arg(expected_version)::bigint
  AND w.status = 'DEAD'
  AND w.ordering_key IS NOT NULL
  AND r.scope_id = sqlc.arg(scope_id)::text
  AND r.id = w.receipt_id AND r.scope_kind = w.scope_kind
RETURNING w.version, w.consumer, r.ordering_key::text AS ordering_key;

-- name: ReceiptKeyBlockedBehind :one
-- How many receipts of a key wait (BLOCKED) behind sequence number
-- @ordering_seq: for the receipt page of a keyed receipt, such as a DEAD head
-- that holds its key. It reads pginbox_work_ordering for that key only.
SELECT count(*)::bigint AS blocked
FROM pginbox_work
WHERE scope_id = sqlc.arg(scope_id)::text
  AND consumer = sqlc.arg(consumer)::text
  AND scope_kind = sqlc.arg(scope_kind)::text
  AND ordering_key = sqlc.arg(ordering_key)::text
  AND ordering_seq > sqlc.arg(ordering_seq)::bigint
  AND status = 'BLOCKED';
