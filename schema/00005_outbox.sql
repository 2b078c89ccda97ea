-- The outbox. A handler (or any transaction) emits events into
-- pginbox_outbox next to its business writes; a relay later claims them,
-- publishes them and marks them PUBLISHED, fenced by its claim token.
--
-- seq is the emit order. Emits that share an ordering key take a
-- transaction-level advisory lock on it first, so their rows commit in seq
-- order, and the relay publishes each key's events in seq order.

-- +goose Up
CREATE TABLE pginbox_outbox (
    id               uuid        PRIMARY KEY,
    seq              bigint      NOT NULL GENERATED ALWAYS AS IDENTITY,
    source           text        NOT NULL,
    destination      text        NOT NULL,
    ordering_key     text        NOT NULL DEFAULT '',
    event_type       text        NOT NULL,
    schema_version   integer     NOT NULL CHECK (schema_version >= 1),
    payload          json        NOT NULL,
    metadata         jsonb       NOT NULL DEFAULT '{}',
    status           text        NOT NULL DEFAULT 'PENDING'
        CONSTRAINT pginbox_outbox_status_check
        CHECK (status IN ('PENDING', 'PUBLISHING', 'PUBLISHED', 'DEAD')),
    attempts         integer     NOT NULL DEFAULT 0,
    available_at     timestamptz NOT NULL DEFAULT now(),
    claim_token      uuid,
    lease_expires_at timestamptz,
    last_error       text,
    version          bigint      NOT NULL DEFAULT 1,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    published_at     timestamptz,
    -- Only a claimed event has a token, so the token alone fences marking.
    CONSTRAINT pginbox_outbox_claim_check CHECK (
        (claim_token IS NOT NULL) = (status = 'PUBLISHING')
    ),
    CONSTRAINT pginbox_outbox_published_check CHECK (
        (published_at IS NOT NULL) = (status = 'PUBLISHED')
    )
);

-- Partial indexes stay small however many PUBLISHED rows retention keeps.
-- Due work, oldest due first (OutboxClaim).
CREATE INDEX pginbox_outbox_due
    ON pginbox_outbox (available_at, seq)
    WHERE status = 'PENDING';
-- The unpublished events of one ordering key, in emit order: what blocks an
-- event until the ones before it are published or DEAD.
CREATE INDEX pginbox_outbox_key
    ON pginbox_outbox (ordering_key, seq)
    WHERE status IN ('PENDING', 'PUBLISHING') AND ordering_key <> '';
CREATE INDEX pginbox_outbox_lease
    ON pginbox_outbox (lease_expires_at)
    WHERE status = 'PUBLISHING';
-- Retention: published rows by age (OutboxPurge).
CREATE INDEX pginbox_outbox_published
    ON pginbox_outbox (published_at)
    WHERE status = 'PUBLISHED';
-- Stats read only the rows that are not PUBLISHED.
CREATE INDEX pginbox_outbox_active
    ON pginbox_outbox (destination, status)
    WHERE status <> 'PUBLISHED';

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pginbox_outbox WHERE status <> 'PUBLISHED') THEN
        RAISE EXCEPTION 'pginbox: cannot roll back the outbox migration: the outbox holds events that were never published, and rolling back drops it'
            USING HINT = 'run the relay until `inbox outbox stats` shows nothing pending, publishing or dead (requeue or delete DEAD events), or stay on this schema version';
    END IF;
END
$$;
-- +goose StatementEnd

DROP TABLE pginbox_outbox;
