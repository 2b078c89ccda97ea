-- Schema v2: tenant/global scope joins the identity, replays link to their original,
-- every state change bumps a version, admin actions are audited, completed payloads
-- can be purged. v1 rows become global-scope receipts with unchanged fingerprints, so
-- a redelivery of a v1-era message is still a duplicate.

-- +goose Up
ALTER TABLE pginbox_receipts
    ADD COLUMN scope_kind text NOT NULL DEFAULT 'global',
    ADD COLUMN scope_id text NOT NULL DEFAULT '',
    ADD COLUMN version bigint NOT NULL DEFAULT 1,
    ADD COLUMN replay_of uuid REFERENCES pginbox_receipts (id),
    ADD COLUMN payload_purged_at timestamptz,
    ADD CONSTRAINT pginbox_receipts_scope_check CHECK (
        (scope_kind = 'global' AND scope_id = '')
        OR (scope_kind = 'tenant' AND scope_id <> '')
    ),
    ADD CONSTRAINT pginbox_receipts_purge_check CHECK (
        (payload IS NULL) = (payload_purged_at IS NOT NULL)
    ),
    -- Only a claimed receipt has a claim token, so the token alone fences the
    -- completion and failure updates.
    ADD CONSTRAINT pginbox_receipts_claim_check CHECK (
        (claim_token IS NOT NULL) = (status = 'PROCESSING')
    );

-- Scope is always explicit from v2 on.
ALTER TABLE pginbox_receipts ALTER COLUMN scope_kind DROP DEFAULT;
ALTER TABLE pginbox_receipts ALTER COLUMN payload DROP NOT NULL;

ALTER TABLE pginbox_receipts DROP CONSTRAINT pginbox_receipts_identity_v1;
DROP INDEX pginbox_receipts_due_v1;

-- Replays share the identity of their original, so only originals are unique.
CREATE UNIQUE INDEX pginbox_receipts_identity
    ON pginbox_receipts (scope_kind, scope_id, source, consumer, message_id)
    WHERE replay_of IS NULL;

-- Partial indexes stay small however much COMPLETED history is retained.
CREATE INDEX pginbox_receipts_due
    ON pginbox_receipts (consumer, available_at)
    WHERE status IN ('PENDING', 'RETRYABLE');
CREATE INDEX pginbox_receipts_lease
    ON pginbox_receipts (lease_expires_at)
    WHERE status = 'PROCESSING';
CREATE INDEX pginbox_receipts_purge
    ON pginbox_receipts (completed_at)
    WHERE status = 'COMPLETED' AND payload IS NOT NULL;
CREATE INDEX pginbox_receipts_active
    ON pginbox_receipts (consumer, status)
    WHERE status <> 'COMPLETED';
CREATE INDEX pginbox_receipts_replay_of
    ON pginbox_receipts (replay_of)
    WHERE replay_of IS NOT NULL;

CREATE TABLE pginbox_audit (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    receipt_id     uuid        NOT NULL REFERENCES pginbox_receipts (id),
    action         text        NOT NULL CHECK (action IN ('requeue', 'replay')),
    actor          text        NOT NULL,
    reason         text        NOT NULL,
    from_status    text        NOT NULL,
    to_status      text        NOT NULL,
    from_version   bigint      NOT NULL,
    to_version     bigint      NOT NULL,
    new_receipt_id uuid        REFERENCES pginbox_receipts (id),
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pginbox_audit_receipt ON pginbox_audit (receipt_id, id);

-- +goose Down
-- Workers may be running: lock what this step changes before changing
-- anything, waiting for pginbox_receipts alone and taking the rest without
-- waiting (schema/migrate_locks.go says why; the migrator retries when one
-- is busy).
LOCK TABLE pginbox_receipts IN ACCESS EXCLUSIVE MODE;
LOCK TABLE pginbox_audit IN ACCESS EXCLUSIVE MODE NOWAIT;

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pginbox_receipts
               WHERE scope_kind <> 'global' OR replay_of IS NOT NULL OR payload IS NULL) THEN
        RAISE EXCEPTION 'pginbox: cannot migrate down to schema v1: tenant-scoped, replayed or purged receipts exist and v1 cannot represent them'
            USING HINT = 'delete or archive those receipts first, or stay on schema v2';
    END IF;
    IF EXISTS (SELECT 1 FROM pginbox_audit) THEN
        RAISE EXCEPTION 'pginbox: cannot migrate down to schema v1: the audit trail holds admin actions and v1 has no place for them'
            USING HINT = 'archive pginbox_audit (for example with COPY) and delete its rows first, or stay on schema v2';
    END IF;
END
$$;
-- +goose StatementEnd

DROP TABLE pginbox_audit;
DROP INDEX pginbox_receipts_replay_of;
DROP INDEX pginbox_receipts_active;
DROP INDEX pginbox_receipts_purge;
DROP INDEX pginbox_receipts_lease;
DROP INDEX pginbox_receipts_due;
DROP INDEX pginbox_receipts_identity;

ALTER TABLE pginbox_receipts
    DROP CONSTRAINT pginbox_receipts_claim_check,
    DROP CONSTRAINT pginbox_receipts_purge_check,
    DROP CONSTRAINT pginbox_receipts_scope_check,
    DROP COLUMN payload_purged_at,
    DROP COLUMN replay_of,
    DROP COLUMN version,
    DROP COLUMN scope_id,
    DROP COLUMN scope_kind,
    ADD CONSTRAINT pginbox_receipts_identity_v1 UNIQUE (source, consumer, message_id);
ALTER TABLE pginbox_receipts ALTER COLUMN payload SET NOT NULL;

CREATE INDEX pginbox_receipts_due_v1 ON pginbox_receipts (available_at)
    WHERE status IN ('PENDING', 'RETRYABLE');
