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

-- name: OutboxNotify :exec
-- Wakes listening relays when the emitting transaction commits (a rollback
-- wakes nobody). A statement of its own: a notify inside the insert's
-- RETURNING or a data-modifying CTE could be skipped or repeated by the plan.
-- PostgreSQL folds identical notifications of one transaction into one.
SELECT pg_notify('pginbox_outbox', '');

-- name: OutboxListen :exec
-- Subscribes the session to Emit's wake-up notifications.
LISTEN pginbox_outbox;
