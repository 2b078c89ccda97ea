-- Schema v7: every reference between pginbox's tables carries the scope, so
-- PostgreSQL itself refuses a row that points at another scope's receipt.
--
-- Foreign-key checks ignore row-level security, and before v7 the work row,
-- the audit row's new_receipt_id and replay_of referenced a receipt by ID
-- alone: a role that row-level security held to tenant A could queue a work
-- row of its own scope for tenant B's receipt, and recovery would then mark
-- B's receipt DEAD. From v7 on each reference is (receipt ID, scope_kind,
-- scope_id) against a unique key of pginbox_receipts on the same three
-- columns, and the dependent row's own scope is what the policies check. A
-- policy subquery cannot do this: Accept writes the receipt and its work row
-- in one statement, and a subquery does not see the row inserted beside it.
--
-- pginbox_audit gets a scope of its own (its receipt's) and the plain scope
-- policy. pginbox_outbox gets receipt_id: the receipt whose handler emitted
-- the event (NULL for an event emitted outside a handler).
--
-- The primary keys stay the ID alone: on one node, IDs are globally unique.
-- A distributed port keys every table by scope_id, and these references
-- already carry it.
--
-- The data steps run with row_security off: a role that row-level security
-- would restrict gets an error here instead of silently seeing no rows. Run
-- the migration as a superuser or a role with BYPASSRLS once tenancy is
-- enabled (docs/TENANCY.md); the migrator checks it before it starts.
--
-- Rows only raw SQL could have written, which the new keys refuse, are
-- removed and counted in NOTICEs: work rows whose scope differs from their
-- receipt's (a receipt they made DEAD that had completed is COMPLETED again),
-- audit rows linking a receipt of another scope, and receipts whose
-- replay_of names another scope's receipt (with their replays, work and
-- audit rows). The unique key and the foreign keys are built and validated
-- under an exclusive lock: on large tables, run it in a quiet period.

-- +goose Up
SET LOCAL row_security = off;

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

-- The key the references point at is the tenant lists' index (scope_kind,
-- scope_id, id) made unique: the same three columns (a foreign key matches
-- them in any order), so the accept path maintains no second index.
CREATE UNIQUE INDEX pginbox_receipts_scope_key ON pginbox_receipts (scope_kind, scope_id, id);
DROP INDEX pginbox_receipts_scope;
ALTER TABLE pginbox_receipts
    ADD CONSTRAINT pginbox_receipts_scope_key UNIQUE USING INDEX pginbox_receipts_scope_key,
    DROP CONSTRAINT pginbox_receipts_replay_of_fkey;
ALTER TABLE pginbox_receipts
    ADD CONSTRAINT pginbox_receipts_replay_of_fkey FOREIGN KEY (replay_of, scope_kind, scope_id)
        REFERENCES pginbox_receipts (id, scope_kind, scope_id);

ALTER TABLE pginbox_work
    ADD CONSTRAINT pginbox_work_scope_check CHECK (
        (scope_kind = 'global' AND scope_id = '')
        OR (scope_kind = 'tenant' AND scope_id <> '')
    ),
    ADD CONSTRAINT pginbox_work_receipt_fkey FOREIGN KEY (receipt_id, scope_kind, scope_id)
        REFERENCES pginbox_receipts (id, scope_kind, scope_id);

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
    DROP CONSTRAINT pginbox_audit_new_receipt_id_fkey,
    ADD CONSTRAINT pginbox_audit_receipt_id_fkey FOREIGN KEY (receipt_id, scope_kind, scope_id)
        REFERENCES pginbox_receipts (id, scope_kind, scope_id),
    ADD CONSTRAINT pginbox_audit_new_receipt_id_fkey FOREIGN KEY (new_receipt_id, scope_kind, scope_id)
        REFERENCES pginbox_receipts (id, scope_kind, scope_id);
DROP POLICY pginbox_scope ON pginbox_audit;
CREATE POLICY pginbox_scope ON pginbox_audit
    USING ((scope_kind = 'tenant' AND scope_id = current_setting('pginbox.tenant', true))
        OR (scope_kind = 'global' AND current_setting('pginbox.global', true) = 'on'))
    WITH CHECK ((scope_kind = 'tenant' AND scope_id = current_setting('pginbox.tenant', true))
        OR (scope_kind = 'global' AND current_setting('pginbox.global', true) = 'on'));

-- No index on receipt_id: nothing deletes receipts at run time, and reading a
-- receipt's events is for tests and inspection by hand.
ALTER TABLE pginbox_outbox
    ADD COLUMN receipt_id uuid,
    ADD CONSTRAINT pginbox_outbox_receipt_fkey FOREIGN KEY (receipt_id, scope_kind, scope_id)
        REFERENCES pginbox_receipts (id, scope_kind, scope_id);

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
SET LOCAL row_security = off;

-- Workers may be running: lock what this step changes before changing
-- anything, waiting for pginbox_receipts alone and taking the rest without
-- waiting (schema/migrate_locks.go says why; the migrator retries when one
-- is busy).
LOCK TABLE pginbox_receipts IN ACCESS EXCLUSIVE MODE;
LOCK TABLE pginbox_work, pginbox_audit, pginbox_outbox, pginbox_receipts_live IN ACCESS EXCLUSIVE MODE NOWAIT;

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
LEFT JOIN pginbox_work w ON w.receipt_id = r.id;

ALTER TABLE pginbox_outbox
    DROP CONSTRAINT pginbox_outbox_receipt_fkey,
    DROP COLUMN receipt_id;

DROP POLICY pginbox_scope ON pginbox_audit;
CREATE POLICY pginbox_scope ON pginbox_audit
    USING (EXISTS (SELECT 1 FROM pginbox_receipts r WHERE r.id = receipt_id))
    WITH CHECK (EXISTS (SELECT 1 FROM pginbox_receipts r WHERE r.id = receipt_id));
ALTER TABLE pginbox_audit
    DROP CONSTRAINT pginbox_audit_receipt_id_fkey,
    DROP CONSTRAINT pginbox_audit_new_receipt_id_fkey,
    DROP CONSTRAINT pginbox_audit_scope_check,
    DROP COLUMN scope_kind,
    DROP COLUMN scope_id,
    ADD CONSTRAINT pginbox_audit_receipt_id_fkey FOREIGN KEY (receipt_id) REFERENCES pginbox_receipts (id),
    ADD CONSTRAINT pginbox_audit_new_receipt_id_fkey FOREIGN KEY (new_receipt_id) REFERENCES pginbox_receipts (id);

ALTER TABLE pginbox_work
    DROP CONSTRAINT pginbox_work_receipt_fkey,
    DROP CONSTRAINT pginbox_work_scope_check;

ALTER TABLE pginbox_receipts
    DROP CONSTRAINT pginbox_receipts_replay_of_fkey;
ALTER TABLE pginbox_receipts
    ADD CONSTRAINT pginbox_receipts_replay_of_fkey FOREIGN KEY (replay_of) REFERENCES pginbox_receipts (id),
    DROP CONSTRAINT pginbox_receipts_scope_key;
CREATE INDEX pginbox_receipts_scope ON pginbox_receipts (scope_kind, scope_id, id);
