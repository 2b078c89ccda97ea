-- name: ReceiptAcceptBatch :many
-- Inserts many receipts and their queue rows in one statement (one commit outside a caller's
-- transaction). Identities that already exist are skipped; the caller reads them
-- with ReceiptsByIdentities. With @notify the wake-up is sent once per distinct
-- consumer that got a new receipt, not once per row. The set-returning functions in one
-- select list advance in lockstep, zipping the arrays (sqlc cannot analyze the
-- multi-argument unnest). IDs and JSON travel as text[], which encodes in every
-- pgx exec mode, the simple protocol included.
WITH inserted AS (
    INSERT INTO pginbox_receipts (
        id, scope_kind, scope_id, source, consumer, message_id,
        event_type, schema_version, fingerprint, payload, metadata, max_attempts
    )
    SELECT
        unnest(sqlc.arg(ids)::text[])::uuid,
        unnest(sqlc.arg(scope_kinds)::text[]),
        unnest(sqlc.arg(scope_ids)::text[]),
        unnest(sqlc.arg(sources)::text[]),
        unnest(sqlc.arg(consumers)::text[]),
        unnest(sqlc.arg(message_ids)::text[]),
        unnest(sqlc.arg(event_types)::text[]),
        unnest(sqlc.arg(schema_versions)::integer[]),
        unnest(sqlc.arg(fingerprints)::bytea[]),
        unnest(sqlc.arg(payloads)::text[])::json,
        unnest(sqlc.arg(metadatas)::text[])::jsonb,
        sqlc.arg(max_attempts)::integer
    ON CONFLICT (scope_kind, scope_id, source, consumer, message_id) WHERE replay_of IS NULL
    DO NOTHING
    RETURNING id, scope_kind, scope_id, consumer, max_attempts
),
queued AS (
    INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts)
    SELECT id, scope_kind, scope_id, consumer, max_attempts FROM inserted
    RETURNING receipt_id AS id, consumer
),
woken AS (
    SELECT count(*) AS n
    FROM (SELECT DISTINCT q.consumer FROM queued q) c
    WHERE CASE WHEN sqlc.arg(notify)::boolean
               THEN pg_notify('pginbox_receipt', c.consumer) IS NOT NULL
               ELSE false END
)
SELECT queued.id FROM queued, woken;

-- name: ReceiptsByIdentities :many
-- The original receipts of many identities at once, with their live status, for
-- the batch items that ReceiptAcceptBatch did not insert.
SELECT r.scope_kind, r.scope_id, r.source, r.consumer, r.message_id,
    r.id, coalesce(w.status, r.status)::text AS status, r.fingerprint
FROM (
    SELECT
        unnest(sqlc.arg(scope_kinds)::text[]) AS scope_kind,
        unnest(sqlc.arg(scope_ids)::text[]) AS scope_id,
        unnest(sqlc.arg(sources)::text[]) AS source,
        unnest(sqlc.arg(consumers)::text[]) AS consumer,
        unnest(sqlc.arg(message_ids)::text[]) AS message_id
) k
JOIN pginbox_receipts r
  ON r.scope_kind = k.scope_kind
 AND r.scope_id = k.scope_id
 AND r.source = k.source
 AND r.consumer = k.consumer
 AND r.message_id = k.message_id
 AND r.replay_of IS NULL
LEFT JOIN pginbox_work w
  ON w.receipt_id = r.id AND w.scope_kind = r.scope_kind AND w.scope_id = r.scope_id;

-- name: ReceiptsByIdentitiesRouted :many
-- ReceiptsByIdentities for identities of one scope, routed to its node on
-- Citus: the batch accept there splits its batch per scope.
SELECT r.scope_kind, r.scope_id, r.source, r.consumer, r.message_id,
    r.id, coalesce(w.status, r.status)::text AS status, r.fingerprint
FROM pginbox_receipts r
LEFT JOIN pginbox_work w
  ON w.receipt_id = r.id AND w.scope_kind = r.scope_kind AND w.scope_id = r.scope_id
 AND w.scope_id = sqlc.arg(scope_id)::text
WHERE r.scope_id = sqlc.arg(scope_id)::text
  AND r.scope_kind = sqlc.arg(scope_kind)::text
  AND r.replay_of IS NULL
  AND (r.source, r.consumer, r.message_id) IN (
      SELECT unnest(sqlc.arg(sources)::text[]), unnest(sqlc.arg(consumers)::text[]),
          unnest(sqlc.arg(message_ids)::text[]));

-- name: ReceiptAcceptBatchRouted :many
-- A batch of one scope on Citus: pginbox_accept_batch (schema v13) inserts
-- the receipts of the new identities and their queue rows from arrays, and
-- returns the IDs it inserted. Outside a transaction Citus hands the call
-- to the scope's node, which plans two statements for the whole batch and
-- commits there. With @notify the workers listening on that node are woken
-- at its commit. IDs travel as text for the simple protocol.
SELECT b.id::uuid AS id
FROM pginbox_accept_batch(
    @scope_kind::text, @scope_id::text, (sqlc.arg(ids)::text[])::uuid[], sqlc.arg(sources)::text[],
    sqlc.arg(consumers)::text[], sqlc.arg(message_ids)::text[], sqlc.arg(event_types)::text[],
    sqlc.arg(schema_versions)::integer[], sqlc.arg(fingerprints)::bytea[], sqlc.arg(payloads)::json[],
    sqlc.arg(metadatas)::jsonb[], @max_attempts::integer, @notify::boolean
) AS b (id);

-- name: ReceiptQueueBatchRouted :exec
-- A batch accept on Citus, for one scope: the queue rows of the receipts the
-- pipelined ReceiptInsertRouted statements inserted (an ID whose insert hit
-- an existing identity is in no row, so it gets none). A colocated
-- INSERT ... SELECT filtered on the scope: it runs on the scope's node,
-- where ReceiptAcceptBatch's INSERT ... SELECT unnest(...) would be pulled
-- through the coordinator.
INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts)
SELECT r.id, r.scope_kind, r.scope_id, r.consumer, r.max_attempts
FROM pginbox_receipts r
WHERE r.scope_id = sqlc.arg(scope_id)::text
  AND r.id = ANY(sqlc.arg(ids)::text[]::uuid[]);
