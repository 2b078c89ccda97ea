-- Schema v4: the queue state of active receipts moves to a small table of its
-- own, pginbox_work. A claim, a heartbeat, a retry or a recovery writes only
-- that narrow, short-lived row; the retained receipt (identity, content,
-- lineage, final state) is written when it is accepted and once more when it
-- completes, and that update is HOT: no index of pginbox_receipts covers a
-- column it changes, and the table leaves room on each page (fillfactor). So
-- the churn of processing stays in a table that vacuums fast and stays
-- cached, and the retained history gets one dead tuple per message instead of
-- two, pruned on its page without waiting for vacuum.
--
-- pginbox_receipts.status is PENDING while a work row exists (the live status
-- is the work row's), and COMPLETED or DEAD once settled.
-- pginbox_receipts_live joins the two with the columns the table had in v3,
-- for inspection by hand.

-- +goose Up
CREATE TABLE pginbox_work (
    receipt_id       uuid        PRIMARY KEY,
    scope_kind       text        NOT NULL,
    scope_id         text        NOT NULL,
    consumer         text        NOT NULL,
    status           text        NOT NULL DEFAULT 'PENDING'
        CONSTRAINT pginbox_work_status_check
        CHECK (status IN ('PENDING', 'PROCESSING', 'RETRYABLE', 'DEAD')),
    attempts         integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL CHECK (max_attempts >= 1),
    available_at     timestamptz NOT NULL DEFAULT now(),
    claim_token      uuid,
    lease_expires_at timestamptz,
    last_error       text,
    version          bigint      NOT NULL DEFAULT 1,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- Only a claimed receipt has a claim token, so the token alone fences.
    CONSTRAINT pginbox_work_claim_check CHECK ((claim_token IS NOT NULL) = (status = 'PROCESSING'))
);

INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, status, attempts, max_attempts,
    available_at, claim_token, lease_expires_at, last_error, version, updated_at)
SELECT id, scope_kind, scope_id, consumer, status, attempts, max_attempts,
    available_at, claim_token, lease_expires_at, last_error, version, updated_at
FROM pginbox_receipts
WHERE status <> 'COMPLETED';

CREATE INDEX pginbox_work_due ON pginbox_work (consumer, available_at)
    WHERE status IN ('PENDING', 'RETRYABLE');
CREATE INDEX pginbox_work_lease ON pginbox_work (lease_expires_at)
    WHERE status = 'PROCESSING';

DROP INDEX pginbox_receipts_due;
DROP INDEX pginbox_receipts_lease;
DROP INDEX pginbox_receipts_active;
DROP INDEX pginbox_receipts_purge;
ALTER TABLE pginbox_receipts DROP CONSTRAINT pginbox_receipts_claim_check;
UPDATE pginbox_receipts SET status = 'PENDING' WHERE status IN ('PROCESSING', 'RETRYABLE');
ALTER TABLE pginbox_receipts
    DROP COLUMN claim_token,
    DROP COLUMN lease_expires_at,
    DROP COLUMN available_at,
    ADD CONSTRAINT pginbox_receipts_settled_check CHECK (status IN ('PENDING', 'COMPLETED', 'DEAD'));
ALTER TABLE pginbox_receipts SET (fillfactor = 85);

-- Purge walks the receipts that still hold a payload in creation order: a
-- receipt completed before the cutoff was created before it. created_at never
-- changes, so completions stay HOT.
CREATE INDEX pginbox_receipts_purge ON pginbox_receipts (created_at) WHERE payload IS NOT NULL;

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
LEFT JOIN pginbox_work w ON w.receipt_id = r.id;

-- +goose Down
-- Workers may be running: lock what this step changes before changing
-- anything, waiting for pginbox_receipts alone and taking the rest without
-- waiting (schema/migrate_locks.go says why; the migrator retries when one
-- is busy).
LOCK TABLE pginbox_receipts IN ACCESS EXCLUSIVE MODE;
LOCK TABLE pginbox_work, pginbox_receipts_live IN ACCESS EXCLUSIVE MODE NOWAIT;

DROP VIEW pginbox_receipts_live;
DROP INDEX pginbox_receipts_purge;
ALTER TABLE pginbox_receipts RESET (fillfactor);
ALTER TABLE pginbox_receipts
    DROP CONSTRAINT pginbox_receipts_settled_check,
    ADD COLUMN available_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN claim_token uuid,
    ADD COLUMN lease_expires_at timestamptz;
UPDATE pginbox_receipts r
SET status = w.status, attempts = w.attempts, max_attempts = w.max_attempts,
    available_at = w.available_at, claim_token = w.claim_token,
    lease_expires_at = w.lease_expires_at, last_error = w.last_error,
    version = w.version, updated_at = w.updated_at
FROM pginbox_work w
WHERE w.receipt_id = r.id;
ALTER TABLE pginbox_receipts ADD CONSTRAINT pginbox_receipts_claim_check CHECK (
    (claim_token IS NOT NULL) = (status = 'PROCESSING'));
DROP TABLE pginbox_work;
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
