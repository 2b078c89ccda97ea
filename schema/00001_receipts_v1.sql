-- Schema v1: the first shape of the inbox. Identity is source + consumer + message
-- ID (no scope), no replay lineage, no audit, no optimistic version.

-- +goose Up
CREATE TABLE pginbox_receipts (
    id               uuid        PRIMARY KEY,
    source           text        NOT NULL,
    consumer         text        NOT NULL,
    message_id       text        NOT NULL,
    event_type       text        NOT NULL,
    schema_version   integer     NOT NULL CHECK (schema_version >= 1),
    fingerprint      bytea       NOT NULL CHECK (octet_length(fingerprint) = 32),
    payload          jsonb       NOT NULL,
    metadata         jsonb       NOT NULL DEFAULT '{}',
    status           text        NOT NULL DEFAULT 'PENDING'
        CONSTRAINT pginbox_receipts_status_check
        CHECK (status IN ('PENDING', 'PROCESSING', 'RETRYABLE', 'COMPLETED', 'DEAD')),
    attempts         integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL DEFAULT 10 CHECK (max_attempts >= 1),
    available_at     timestamptz NOT NULL DEFAULT now(),
    claim_token      uuid,
    lease_expires_at timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    CONSTRAINT pginbox_receipts_identity_v1 UNIQUE (source, consumer, message_id)
);

CREATE INDEX pginbox_receipts_due_v1 ON pginbox_receipts (available_at)
    WHERE status IN ('PENDING', 'RETRYABLE');

-- +goose Down
DROP TABLE pginbox_receipts;
