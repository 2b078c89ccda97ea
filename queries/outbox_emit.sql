-- name: OutboxEventInsert :one
-- Writes one event into the caller's transaction. An event with an ordering
-- key first takes a transaction-level advisory lock on the key (class
-- 1885825378, "pgib"; the two-int form never meets goose's or an
-- application's one-bigint locks), so two transactions emitting for one key
-- commit one after the other and seq, drawn after the lock, is their commit
-- order: a relay that sees an event of the key sees every earlier one. CASE
-- guarantees unordered events never lock. An existing ID inserts nothing and
-- returns no row, without aborting the caller's transaction. @receipt_id is
-- the receipt whose handler emits (NULL outside a handler), kept when the
-- event has that receipt's scope (@receipt_tenant, '' for the global scope):
-- an event the handler emits through another transaction of another scope
-- is not linked, and the foreign key refuses any other mismatch.
INSERT INTO pginbox_outbox (
    id, source, destination, ordering_key, event_type, schema_version, payload, metadata, receipt_id
)
SELECT sqlc.arg(id)::uuid,
    sqlc.arg(source)::text,
    sqlc.arg(destination)::text,
    sqlc.arg(ordering_key)::text,
    sqlc.arg(event_type)::text,
    sqlc.arg(schema_version)::integer,
    sqlc.arg(payload)::text::json,
    sqlc.arg(metadata)::text::jsonb,
    CASE WHEN coalesce(current_setting('pginbox.tenant', true), '') = sqlc.arg(receipt_tenant)::text
         THEN sqlc.narg(receipt_id)::uuid END
WHERE CASE WHEN sqlc.arg(ordering_key)::text = '' THEN true
           ELSE pg_advisory_xact_lock(1885825378, hashtext(sqlc.arg(ordering_key)::text)) IS NOT NULL
      END
ON CONFLICT (id) DO NOTHING
RETURNING id;

-- name: OutboxEmitScope :one
-- Emit on Citus, step 1: the scope of the caller's transaction (the setting
-- OutboxEventInsert's column defaults read: '' for the global scope). Runs
-- on the coordinator; the statements after it carry the scope, so they run
-- on its node.
SELECT coalesce(current_setting('pginbox.tenant', true), '')::text AS tenant;

-- name: OutboxKeyLockScope :one
-- Emit on Citus, step 2 for an event with an ordering key: OutboxEventInsert's
-- key lock, taken on the node of the scope @scope_id. The one-row read of an
-- ID that never exists carries the scope, so Citus routes the statement there
-- and the lock is held by the transaction's connection to that node until it
-- commits; the lock function alone would run on the coordinator. Keyed by
-- (scope, key): on Citus an ordering key orders one scope's events.
SELECT (pg_advisory_xact_lock(1885825378,
        hashtext(sqlc.arg(scope_id)::text || '/' || sqlc.arg(ordering_key)::text)) IS NOT NULL)::boolean AS locked
FROM (
    SELECT count(*)
    FROM pginbox_outbox o
    WHERE o.scope_id = sqlc.arg(scope_id)::text
      AND o.id = '00000000-0000-0000-0000-000000000000'
) AS one_row;

-- name: OutboxEventInsertScope :one
-- Emit on Citus, step 3: OutboxEventInsert with the scope given (@scope_kind,
-- @scope_id, as read by OutboxEmitScope) and the receipt link decided by the
-- caller: a VALUES insert with the distribution column a parameter runs on
-- the scope's node. seq comes from the coordinator's sequence, after the key
-- lock: per (scope, key), seq is the commit order.
INSERT INTO pginbox_outbox (
    id, scope_kind, scope_id, source, destination, ordering_key, event_type,
    schema_version, payload, metadata, receipt_id
)
VALUES (sqlc.arg(id)::uuid,
    sqlc.arg(scope_kind)::text,
    sqlc.arg(scope_id)::text,
    sqlc.arg(source)::text,
    sqlc.arg(destination)::text,
    sqlc.arg(ordering_key)::text,
    sqlc.arg(event_type)::text,
    sqlc.arg(schema_version)::integer,
    sqlc.arg(payload)::text::json,
    sqlc.arg(metadata)::text::jsonb,
    sqlc.narg(receipt_id)::uuid)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: OutboxNotify :exec
-- Wakes listening relays when the emitting transaction commits (a rollback
-- wakes nobody). A statement of its own: a notify inside the insert's
-- RETURNING or a data-modifying CTE could be skipped or repeated by the plan.
-- PostgreSQL folds identical notifications of one transaction into one.
SELECT pg_notify('pginbox_outbox', '');

-- name: OutboxListen :exec
-- Subscribes the session to Emit's wake-up notifications.
LISTEN pginbox_outbox;
