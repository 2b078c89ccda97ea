-- Schema v8: the due index of the queue leads with the scope, so a claim can
-- serve the scopes with due work in turns (one tenant's backlog cannot hold
-- the others' messages behind it): the claim walks the distinct scopes of
-- each consumer through the index (one descent per scope), then takes each
-- scope's oldest due rows from the same index. It replaces the index it was
-- built from, so the queue keeps one due index to maintain. On Citus the
-- same statements change every shard.

-- +goose Up
DROP INDEX pginbox_work_due;
CREATE INDEX pginbox_work_due ON pginbox_work (consumer, scope_kind, scope_id, available_at)
    WHERE status IN ('PENDING', 'RETRYABLE');

-- +goose Down
DROP INDEX pginbox_work_due;
CREATE INDEX pginbox_work_due ON pginbox_work (consumer, available_at)
    WHERE status IN ('PENDING', 'RETRYABLE');
