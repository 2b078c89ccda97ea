-- Schema v10: pginbox_accept, the accept of one message as a function, for
-- Citus. One server keeps its single statement (ReceiptAccept), which Citus
-- cannot route: it pulls the CTE's rows through the coordinator. The function
-- does the same work (the receipt, and its queue row when the identity is
-- new), and on Citus it is distributed by its scope argument, colocated with
-- pginbox's tables: called outside a transaction, the coordinator hands the
-- whole call to the scope's node, which runs both inserts there and commits
-- once, instead of routing each statement and its BEGIN and COMMIT from the
-- coordinator. Called in a transaction (AcceptTx, or a scope set for
-- row-level security), it runs on the coordinator and each insert is routed.
-- It returns the new receipt's queue row, and no row for an identity that
-- exists.
--
-- The search_path is fixed at migration time: on a worker node the call runs
-- in a connection of Citus's, whose search_path is not the caller's.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION pginbox_accept(
    p_id uuid, p_scope_kind text, p_scope_id text, p_source text, p_consumer text,
    p_message_id text, p_event_type text, p_schema_version integer, p_fingerprint bytea,
    p_payload json, p_metadata jsonb, p_max_attempts integer
) RETURNS SETOF pginbox_work
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    queued pginbox_work;
BEGIN
    INSERT INTO pginbox_receipts (
        id, scope_kind, scope_id, source, consumer, message_id,
        event_type, schema_version, fingerprint, payload, metadata, max_attempts
    ) VALUES (
        p_id, p_scope_kind, p_scope_id, p_source, p_consumer, p_message_id,
        p_event_type, p_schema_version, p_fingerprint, p_payload, p_metadata, p_max_attempts
    )
    ON CONFLICT (scope_kind, scope_id, source, consumer, message_id) WHERE replay_of IS NULL
    DO NOTHING;
    IF NOT FOUND THEN
        RETURN; -- the identity exists
    END IF;
    INSERT INTO pginbox_work AS w (receipt_id, scope_kind, scope_id, consumer, max_attempts)
    VALUES (p_id, p_scope_kind, p_scope_id, p_consumer, p_max_attempts)
    RETURNING w.* INTO queued;
    RETURN NEXT queued;
END
$$;
-- +goose StatementEnd

-- On Citus (the tables are distributed), distribute the function by its
-- scope argument so a call outside a transaction runs on the scope's node.
-- +goose StatementBegin
DO $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = 'pginbox_receipts'::regclass) THEN
            PERFORM create_distributed_function(
                'pginbox_accept(uuid, text, text, text, text, text, text, integer, bytea, json, jsonb, integer)',
                'p_scope_id', colocate_with := 'pginbox_receipts');
        END IF;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION pginbox_accept(uuid, text, text, text, text, text, text, integer, bytea, json, jsonb, integer);
