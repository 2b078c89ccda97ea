-- Schema v7 on Citus: the twin of ../00007_scope_keys.sql for the Citus
-- migration line (schema.MigrateCitus, `inbox migrate up --citus`), which
-- shares v1 to v6 with the single-node line. It makes the same changes (every
-- reference between pginbox's tables carries the scope, the audit trail gets
-- its receipt's scope, the outbox gets receipt_id, the same NOTICEs for rows
-- only raw SQL could have written) and then distributes the tables:
--
--   - every pginbox table is distributed by scope_id (hash), and all four are
--     colocated: the shards of one scope's receipts, work rows, audit rows and
--     events sit on one node, so every statement for one scope runs there;
--   - the first table joins the colocation group named by the setting
--     pginbox.citus_colocate_with (a table distributed by a text tenant
--     column, set by schema.CitusOptions.ColocateWith), or Citus's default
--     group for text columns when it is empty: an application table
--     distributed by its tenant column with colocate_with => 'pginbox_receipts'
--     (or in the default group) shares pginbox's shards, so a handler's
--     business writes and its completion commit on one node;
--   - the global scope is scope_id '': all its rows live in the one shard
--     whose hash range holds ''; that shard is named by
--     get_shard_id_for_distribution_column('pginbox_receipts', '');
--   - Citus needs the distribution column in every primary key, unique index
--     and foreign key: the primary keys become (ID, scope) instead of the ID
--     alone (IDs stay globally unique, they are made by pginbox), the
--     identity and reference keys already carry the scope.
--
-- Run it on the coordinator with the citus extension created and the workers
-- added. It runs in one transaction (Citus's DDL in sequential mode, so the
-- statements after the distribution see its shards on one connection per
-- node), and copies existing rows into the shards.

-- +goose Up
SET LOCAL row_security = off;
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';

-- Workers may be running: lock what this step changes before changing
-- anything, waiting for pginbox_receipts alone and taking the rest without
-- waiting (schema/migrate_locks.go says why; the migrator retries when one
-- is busy).
LOCK TABLE pginbox_receipts IN ACCESS EXCLUSIVE MODE;
LOCK TABLE pginbox_work, pginbox_audit, pginbox_outbox, pginbox_receipts_live IN ACCESS EXCLUSIVE MODE NOWAIT;

-- +goose StatementBegin
DO $$
DECLARE
    removed bigint;
    restored bigint;
BEGIN
    -- Work rows of another scope than their receipt's, or of no receipt at
    -- all. A completed receipt such a row made DEAD (recovery settled it)
    -- completed once: only a completion sets completed_at.
    WITH forged AS (
        DELETE FROM pginbox_work w
        WHERE NOT EXISTS (
            SELECT 1 FROM pginbox_receipts r
            WHERE r.id = w.receipt_id AND r.scope_kind = w.scope_kind AND r.scope_id = w.scope_id)
        RETURNING w.receipt_id
    ), undone AS (
        UPDATE pginbox_receipts r
        SET status = 'COMPLETED', last_error = NULL, version = r.version + 1, updated_at = now()
        FROM forged f
        WHERE r.id = f.receipt_id AND r.status = 'DEAD' AND r.completed_at IS NOT NULL
        RETURNING r.id
    )
    SELECT (SELECT count(*) FROM forged), (SELECT count(*) FROM undone) INTO removed, restored;
    IF removed > 0 THEN
        RAISE NOTICE 'pginbox v7: removed % work row(s) whose scope differs from their receipt''s (only raw SQL writes them); % completed receipt(s) they had made DEAD are COMPLETED again', removed, restored;
    END IF;

    -- Receipts whose replay_of names another scope's receipt (a replay always
    -- has its original's scope), the replays made of them, and their work
    -- and audit rows.
    WITH RECURSIVE forged AS (
        SELECT r.id FROM pginbox_receipts r
        JOIN pginbox_receipts o ON o.id = r.replay_of
        WHERE o.scope_kind <> r.scope_kind OR o.scope_id <> r.scope_id
        UNION
        SELECT r.id FROM pginbox_receipts r JOIN forged f ON r.replay_of = f.id
    ), audit AS (
        DELETE FROM pginbox_audit a USING forged f WHERE a.receipt_id = f.id OR a.new_receipt_id = f.id
    ), work AS (
        DELETE FROM pginbox_work w USING forged f WHERE w.receipt_id = f.id
    ), receipts AS (
        DELETE FROM pginbox_receipts r USING forged f WHERE r.id = f.id RETURNING r.id
    )
    SELECT count(*) FROM receipts INTO removed;
    IF removed > 0 THEN
        RAISE NOTICE 'pginbox v7: removed % receipt(s) whose replay_of names a receipt of another scope (only raw SQL writes them), with their replays, work and audit rows', removed;
    END IF;

    -- Audit rows whose new receipt has another scope than the receipt acted on.
    DELETE FROM pginbox_audit a
    USING pginbox_receipts r, pginbox_receipts nr
    WHERE r.id = a.receipt_id AND nr.id = a.new_receipt_id
      AND (nr.scope_kind <> r.scope_kind OR nr.scope_id <> r.scope_id);
    GET DIAGNOSTICS removed = ROW_COUNT;
    IF removed > 0 THEN
        RAISE NOTICE 'pginbox v7: removed % audit row(s) linking a receipt of another scope (only raw SQL writes them)', removed;
    END IF;
END
$$;
-- +goose StatementEnd

-- The audit trail gets its receipt's scope first: it is the distribution
-- column.
ALTER TABLE pginbox_audit
    ADD COLUMN scope_kind text,
    ADD COLUMN scope_id text;
UPDATE pginbox_audit a
SET scope_kind = r.scope_kind, scope_id = r.scope_id
FROM pginbox_receipts r
WHERE r.id = a.receipt_id;
ALTER TABLE pginbox_audit
    ALTER COLUMN scope_kind SET NOT NULL,
    ALTER COLUMN scope_id SET NOT NULL,
    ADD CONSTRAINT pginbox_audit_scope_check CHECK (
        (scope_kind = 'global' AND scope_id = '')
        OR (scope_kind = 'tenant' AND scope_id <> '')
    ),
    DROP CONSTRAINT pginbox_audit_receipt_id_fkey,
    DROP CONSTRAINT pginbox_audit_new_receipt_id_fkey;
-- v6's audit policy reads the receipts in a subquery; the plain scope policy
-- replaces it (below).
DROP POLICY pginbox_scope ON pginbox_audit;

ALTER TABLE pginbox_work
    ADD CONSTRAINT pginbox_work_scope_check CHECK (
        (scope_kind = 'global' AND scope_id = '')
        OR (scope_kind = 'tenant' AND scope_id <> '')
    );

-- Keys with the distribution column. The receipts' primary key is the
-- tenant lists' index (scope_kind, scope_id, id), the key the references
-- point at (a foreign key matches its columns in any order).
ALTER TABLE pginbox_receipts DROP CONSTRAINT pginbox_receipts_replay_of_fkey;
DROP INDEX pginbox_receipts_scope;
ALTER TABLE pginbox_receipts
    DROP CONSTRAINT pginbox_receipts_pkey,
    ADD CONSTRAINT pginbox_receipts_pkey PRIMARY KEY (scope_kind, scope_id, id);
ALTER TABLE pginbox_work
    DROP CONSTRAINT pginbox_work_pkey,
    ADD CONSTRAINT pginbox_work_pkey PRIMARY KEY (receipt_id, scope_id);
ALTER TABLE pginbox_audit
    DROP CONSTRAINT pginbox_audit_pkey,
    ADD CONSTRAINT pginbox_audit_pkey PRIMARY KEY (id, scope_id);
ALTER TABLE pginbox_outbox
    DROP CONSTRAINT pginbox_outbox_pkey,
    ADD CONSTRAINT pginbox_outbox_pkey PRIMARY KEY (id, scope_id),
    ADD COLUMN receipt_id uuid;

SELECT create_distributed_table('pginbox_receipts', 'scope_id',
    colocate_with => coalesce(nullif(current_setting('pginbox.citus_colocate_with', true), ''), 'default'));
SELECT create_distributed_table('pginbox_work', 'scope_id', colocate_with => 'pginbox_receipts');
SELECT create_distributed_table('pginbox_audit', 'scope_id', colocate_with => 'pginbox_receipts');
SELECT create_distributed_table('pginbox_outbox', 'scope_id', colocate_with => 'pginbox_receipts');

ALTER TABLE pginbox_receipts
    ADD CONSTRAINT pginbox_receipts_replay_of_fkey FOREIGN KEY (replay_of, scope_kind, scope_id)
        REFERENCES pginbox_receipts (id, scope_kind, scope_id);
ALTER TABLE pginbox_work
    ADD CONSTRAINT pginbox_work_receipt_fkey FOREIGN KEY (receipt_id, scope_kind, scope_id)
        REFERENCES pginbox_receipts (id, scope_kind, scope_id);
-- Citus takes one ADD CONSTRAINT per ALTER TABLE on a distributed table.
ALTER TABLE pginbox_audit
    ADD CONSTRAINT pginbox_audit_receipt_id_fkey FOREIGN KEY (receipt_id, scope_kind, scope_id)
        REFERENCES pginbox_receipts (id, scope_kind, scope_id);
ALTER TABLE pginbox_audit
    ADD CONSTRAINT pginbox_audit_new_receipt_id_fkey FOREIGN KEY (new_receipt_id, scope_kind, scope_id)
        REFERENCES pginbox_receipts (id, scope_kind, scope_id);
ALTER TABLE pginbox_outbox
    ADD CONSTRAINT pginbox_outbox_receipt_fkey FOREIGN KEY (receipt_id, scope_kind, scope_id)
        REFERENCES pginbox_receipts (id, scope_kind, scope_id);

CREATE POLICY pginbox_scope ON pginbox_audit
    USING ((scope_kind = 'tenant' AND scope_id = current_setting('pginbox.tenant', true))
        OR (scope_kind = 'global' AND current_setting('pginbox.global', true) = 'on'))
    WITH CHECK ((scope_kind = 'tenant' AND scope_id = current_setting('pginbox.tenant', true))
        OR (scope_kind = 'global' AND current_setting('pginbox.global', true) = 'on'));

CREATE OR REPLACE VIEW pginbox_receipts_live WITH (security_invoker = true) AS
SELECT r.id, r.scope_kind, r.scope_id, r.source, r.consumer, r.message_id,
    r.event_type, r.schema_version, r.fingerprint, r.payload, r.metadata,
    coalesce(w.status, r.status) AS status,
    coalesce(w.attempts, r.attempts) AS attempts,
    coalesce(w.max_attempts, r.max_attempts) AS max_attempts,
    w.available_at,
    w.claim_token, w.lease_expires_at,
    coalesce(w.last_error, r.last_error) AS last_error,
    r.created_at,
    greatest(w.updated_at, r.updated_at)::timestamptz AS updated_at,
    r.completed_at,
    coalesce(w.version, r.version) AS version,
    r.replay_of, r.payload_purged_at
FROM pginbox_receipts r
LEFT JOIN pginbox_work w
  ON w.receipt_id = r.id AND w.scope_kind = r.scope_kind AND w.scope_id = r.scope_id;

-- +goose Down
-- Citus cannot turn a distributed table with an identity column
-- (pginbox_audit.id, pginbox_outbox.seq) back into a local table
-- (undistribute_table refuses it, and so does dropping the identity of a
-- distributed table), so the Citus line does not roll back past version 7.
-- +goose StatementBegin
DO $$
BEGIN
    RAISE EXCEPTION 'pginbox: cannot roll back the Citus line below version 7: Citus cannot make tables with identity columns (pginbox_audit, pginbox_outbox) local again'
        USING HINT = 'to leave Citus, copy the rows out (COPY or pg_dump --data-only), migrate a single-node database with `inbox migrate up`, and load them there';
END
$$;
-- +goose StatementEnd
