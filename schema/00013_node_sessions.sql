-- Schema v13: what sessions on Citus worker nodes need.
--
-- With sessions on every node (inbox.Nodes), a scope's accepts, claims and
-- handler transactions go to the node that holds its shards, and Citus runs
-- them there without a hop. Three functions serve them; one server never
-- calls them (one schema for both lines).
--
--   - pginbox_accept_batch accepts the messages of one scope in one call:
--     the receipts of the identities that are new, and their queue rows,
--     from arrays. On Citus it is distributed by its scope argument,
--     colocated with pginbox's tables, so a call outside a transaction runs
--     whole on the scope's node: Citus plans two statements per batch
--     instead of two per message. With p_notify it also wakes the workers
--     listening on that node. It returns the IDs it inserted.
--   - pginbox_local_due_scopes lists the scopes with due work of the given
--     consumers on the shards of pginbox_work that the node it runs on
--     holds, oldest due first: a worker's discovery on that node. Per shard
--     it walks the due index one scope at a time (one descent each), so its
--     cost grows with the scopes that have work, not with the due rows, and
--     one node down hides no other node's scopes. Each session prepares
--     the walk once per shard (planning it cost ten times running it).
--   - pginbox_local_expired_scopes lists the scopes of the node's shards
--     holding expired leases, for lease recovery on that node.
--
-- The two discovery functions read the node's shards by name, which only
-- reads: every change goes through Citus. On Citus they are distributed
-- without a distribution argument, so they exist on every node and run on
-- the node they are called on.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION pginbox_accept_batch(
    p_scope_kind text, p_scope_id text, p_ids uuid[], p_sources text[], p_consumers text[],
    p_message_ids text[], p_event_types text[], p_schema_versions integer[], p_fingerprints bytea[],
    p_payloads json[], p_metadata jsonb[], p_max_attempts integer, p_notify boolean
) RETURNS SETOF uuid
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    woken text[];
BEGIN
    RETURN QUERY
    WITH inserted AS (
        INSERT INTO pginbox_receipts (
            id, scope_kind, scope_id, source, consumer, message_id,
            event_type, schema_version, fingerprint, payload, metadata, max_attempts
        )
        SELECT m.id, p_scope_kind, p_scope_id, m.source, m.consumer, m.message_id,
            m.event_type, m.schema_version, m.fingerprint, m.payload, m.metadata, p_max_attempts
        FROM unnest(p_ids, p_sources, p_consumers, p_message_ids, p_event_types,
                    p_schema_versions, p_fingerprints, p_payloads, p_metadata)
            AS m (id, source, consumer, message_id, event_type, schema_version, fingerprint, payload, metadata)
        ON CONFLICT (scope_kind, scope_id, source, consumer, message_id) WHERE replay_of IS NULL
        DO NOTHING
        RETURNING pginbox_receipts.id, pginbox_receipts.consumer
    )
    INSERT INTO pginbox_work AS w (receipt_id, scope_kind, scope_id, consumer, max_attempts)
    SELECT i.id, p_scope_kind, p_scope_id, i.consumer, p_max_attempts FROM inserted i
    RETURNING w.receipt_id;
    IF p_notify AND FOUND THEN
        SELECT array_agg(DISTINCT c) INTO woken FROM unnest(p_consumers) c;
        PERFORM pg_notify('pginbox_receipt', c) FROM unnest(woken) c;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION pginbox_local_due_scopes(p_consumers text[], p_max integer)
RETURNS TABLE (scope_kind text, scope_id text, oldest_due timestamptz)
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    shard text;
    stmt text;
BEGIN
    FOR shard IN
        SELECT shard_name('pginbox_work'::regclass, s.shardid)
        FROM pg_dist_shard s
        JOIN pg_dist_placement p ON p.shardid = s.shardid
        WHERE s.logicalrelid = 'pginbox_work'::regclass
          AND p.groupid = (SELECT groupid FROM pg_dist_local_group)
    LOOP
        -- Planning the walk cost ten times running it: each session
        -- prepares it once per shard and reuses that plan.
        stmt := 'pginbox_due_' || shard;
        IF NOT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = stmt) THEN
            EXECUTE format($q$PREPARE %I (text[], integer) AS
                WITH RECURSIVE walk AS (
                    SELECT c.name AS consumer, f.scope_kind, f.scope_id, f.available_at, 1 AS depth
                    FROM unnest($1) AS c (name)
                    CROSS JOIN LATERAL (
                        SELECT w.scope_kind, w.scope_id, w.available_at
                        FROM %2$s w
                        WHERE w.consumer = c.name AND w.status IN ('PENDING', 'RETRYABLE')
                        ORDER BY w.scope_kind, w.scope_id, w.available_at
                        LIMIT 1
                    ) f
                    UNION ALL
                    SELECT s.consumer, n.scope_kind, n.scope_id, n.available_at, s.depth + 1
                    FROM walk s
                    CROSS JOIN LATERAL (
                        SELECT w.scope_kind, w.scope_id, w.available_at
                        FROM %2$s w
                        WHERE w.consumer = s.consumer AND w.status IN ('PENDING', 'RETRYABLE')
                          AND (w.scope_kind, w.scope_id) > (s.scope_kind, s.scope_id)
                        ORDER BY w.scope_kind, w.scope_id, w.available_at
                        LIMIT 1
                    ) n
                    WHERE s.depth < 10000
                )
                SELECT w.scope_kind, w.scope_id, min(w.available_at)
                FROM walk w
                WHERE w.available_at <= now()
                GROUP BY w.scope_kind, w.scope_id
                ORDER BY 3, 2
                LIMIT $2$q$, stmt, shard);
        END IF;
        BEGIN
            RETURN QUERY EXECUTE format('EXECUTE %I(%L, %s)', stmt, p_consumers, p_max);
        EXCEPTION WHEN undefined_table THEN
            -- Moved away since the catalog was read, and dropped.
            EXECUTE format('DEALLOCATE %I', stmt);
        END;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION pginbox_local_expired_scopes(p_consumers text[], p_max integer)
RETURNS TABLE (scope_id text)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    shard text;
BEGIN
    FOR shard IN
        SELECT shard_name('pginbox_work'::regclass, s.shardid)
        FROM pg_dist_shard s
        JOIN pg_dist_placement p ON p.shardid = s.shardid
        WHERE s.logicalrelid = 'pginbox_work'::regclass
          AND p.groupid = (SELECT groupid FROM pg_dist_local_group)
    LOOP
        BEGIN
            RETURN QUERY EXECUTE format($q$
                SELECT DISTINCT e.scope_id FROM %1$s e
                WHERE e.status = 'PROCESSING' AND e.lease_expires_at < now()
                  AND e.consumer = ANY ($1::text[])
                LIMIT $2
            $q$, shard) USING p_consumers, p_max;
        EXCEPTION WHEN undefined_table THEN
            NULL;
        END;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- On Citus, distribute the accept by its scope argument (a call outside a
-- transaction runs on the scope's node) and the discovery functions
-- without one (they exist on every node and run where they are called).
-- +goose StatementBegin
DO $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = 'pginbox_receipts'::regclass) THEN
            PERFORM create_distributed_function(
                'pginbox_accept_batch(text, text, uuid[], text[], text[], text[], text[], integer[], bytea[], json[], jsonb[], integer, boolean)',
                'p_scope_id', colocate_with := 'pginbox_receipts');
            PERFORM create_distributed_function('pginbox_local_due_scopes(text[], integer)');
            PERFORM create_distributed_function('pginbox_local_expired_scopes(text[], integer)');
        END IF;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION pginbox_local_expired_scopes(text[], integer);
DROP FUNCTION pginbox_local_due_scopes(text[], integer);
DROP FUNCTION pginbox_accept_batch(text, text, uuid[], text[], text[], text[], text[], integer[], bytea[], json[], jsonb[], integer, boolean);
