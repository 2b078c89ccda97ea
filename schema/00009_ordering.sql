-- Schema v9: opt-in per-key ordering. A receipt accepted with an ordering
-- key gets the next sequence number of its (consumer, scope, key), and its
-- work row waits as BLOCKED while an earlier receipt of the key still has a
-- work row (PENDING, PROCESSING, RETRYABLE or DEAD): BLOCKED is not due, so
-- no claim sees it, and the due index leaves it out. When the key's head
-- completes (or an operator skips it), the next BLOCKED row by sequence
-- becomes PENDING. The receipt's own status stays PENDING while it waits.
--
-- Both tables carry the key and the sequence: the receipts' copy gives the
-- next sequence number (the work rows of a key may all be gone), the work
-- rows' copy finds the key's head and its next waiter. Both indexes are
-- partial: unkeyed receipts, the default, maintain neither. On Citus the
-- same statements change every shard (one change per ALTER TABLE).

-- +goose Up
-- Workers may be running: lock what this step changes before changing
-- anything, waiting for pginbox_receipts alone and taking the rest without
-- waiting (schema/migrate_locks.go says why; the migrator retries when one
-- is busy).
LOCK TABLE pginbox_receipts IN ACCESS EXCLUSIVE MODE;
LOCK TABLE pginbox_work, pginbox_audit, pginbox_receipts_live IN ACCESS EXCLUSIVE MODE NOWAIT;

ALTER TABLE pginbox_receipts ADD COLUMN ordering_key text;
ALTER TABLE pginbox_receipts ADD COLUMN ordering_seq bigint;
ALTER TABLE pginbox_work ADD COLUMN ordering_key text;
ALTER TABLE pginbox_work ADD COLUMN ordering_seq bigint;
ALTER TABLE pginbox_work DROP CONSTRAINT pginbox_work_status_check;
ALTER TABLE pginbox_work ADD CONSTRAINT pginbox_work_status_check
    CHECK (status IN ('PENDING', 'PROCESSING', 'RETRYABLE', 'DEAD', 'BLOCKED'));

-- An operator may skip a DEAD receipt at the head of its key (audited).
ALTER TABLE pginbox_audit DROP CONSTRAINT pginbox_audit_action_check;
ALTER TABLE pginbox_audit ADD CONSTRAINT pginbox_audit_action_check
    CHECK (action IN ('requeue', 'replay', 'skip'));

CREATE INDEX pginbox_work_ordering ON pginbox_work (consumer, scope_kind, scope_id, ordering_key, ordering_seq)
    WHERE ordering_key IS NOT NULL;
CREATE INDEX pginbox_receipts_ordering ON pginbox_receipts (consumer, scope_kind, scope_id, ordering_key, ordering_seq)
    WHERE ordering_key IS NOT NULL;

-- The live view shows a waiting receipt as PENDING, with blocked set.
CREATE OR REPLACE VIEW pginbox_receipts_live WITH (security_invoker = true) AS
SELECT r.id, r.scope_kind, r.scope_id, r.source, r.consumer, r.message_id,
    r.event_type, r.schema_version, r.fingerprint, r.payload, r.metadata,
    (CASE WHEN w.status = 'BLOCKED' THEN 'PENDING' ELSE coalesce(w.status, r.status) END)::text AS status,
    coalesce(w.attempts, r.attempts) AS attempts,
    coalesce(w.max_attempts, r.max_attempts) AS max_attempts,
    w.available_at,
    w.claim_token, w.lease_expires_at,
    coalesce(w.last_error, r.last_error) AS last_error,
    r.created_at,
    greatest(w.updated_at, r.updated_at)::timestamptz AS updated_at,
    r.completed_at,
    coalesce(w.version, r.version) AS version,
    r.replay_of, r.payload_purged_at,
    r.ordering_key, r.ordering_seq,
    coalesce(w.status = 'BLOCKED', false)::boolean AS blocked
FROM pginbox_receipts r
LEFT JOIN pginbox_work w
  ON w.receipt_id = r.id AND w.scope_kind = r.scope_kind AND w.scope_id = r.scope_id;

-- +goose Down
-- Workers may be running: lock what this step changes before changing
-- anything, waiting for pginbox_receipts alone and taking the rest without
-- waiting (schema/migrate_locks.go says why; the migrator retries when one
-- is busy).
LOCK TABLE pginbox_receipts IN ACCESS EXCLUSIVE MODE;
LOCK TABLE pginbox_work, pginbox_audit, pginbox_receipts_live IN ACCESS EXCLUSIVE MODE NOWAIT;

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pginbox_audit WHERE action = 'skip') THEN
        RAISE EXCEPTION 'pginbox: cannot migrate down to schema v8: the audit trail records skips and v8 has no place for them'
            USING HINT = 'archive the skip rows of pginbox_audit (for example with COPY) and delete them first, or stay on schema v9';
    END IF;
END
$$;
-- +goose StatementEnd

-- Version 8 has no order: the waiting receipts become due now, in any order.
-- A view loses its columns only by being dropped, and its grants with it (the
-- tenant role's SELECT, docs/TENANCY.md): they are read first and given back.
-- +goose StatementBegin
DO $$
DECLARE
    grants text[];
    g text;
BEGIN
    SELECT coalesce(array_agg(format('GRANT %s ON pginbox_receipts_live TO %I', p.privilege_type, p.grantee)), '{}')
    INTO grants
    FROM information_schema.role_table_grants p
    WHERE p.table_name = 'pginbox_receipts_live' AND p.table_schema = current_schema()
      AND p.grantee <> (SELECT pg_get_userbyid(c.relowner) FROM pg_class c WHERE c.oid = 'pginbox_receipts_live'::regclass);
    DROP VIEW pginbox_receipts_live;
    CREATE VIEW pginbox_receipts_live WITH (security_invoker = true) AS
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
    FOREACH g IN ARRAY grants LOOP
        EXECUTE g;
    END LOOP;
END
$$;
-- +goose StatementEnd
UPDATE pginbox_work
SET status = 'PENDING', available_at = now(), version = version + 1, updated_at = now()
WHERE status = 'BLOCKED';
DROP INDEX pginbox_receipts_ordering;
DROP INDEX pginbox_work_ordering;
ALTER TABLE pginbox_work DROP CONSTRAINT pginbox_work_status_check;
ALTER TABLE pginbox_work ADD CONSTRAINT pginbox_work_status_check
    CHECK (status IN ('PENDING', 'PROCESSING', 'RETRYABLE', 'DEAD'));
ALTER TABLE pginbox_audit DROP CONSTRAINT pginbox_audit_action_check;
ALTER TABLE pginbox_audit ADD CONSTRAINT pginbox_audit_action_check
    CHECK (action IN ('requeue', 'replay'));
ALTER TABLE pginbox_work DROP COLUMN ordering_seq;
ALTER TABLE pginbox_work DROP COLUMN ordering_key;
ALTER TABLE pginbox_receipts DROP COLUMN ordering_seq;
ALTER TABLE pginbox_receipts DROP COLUMN ordering_key;
