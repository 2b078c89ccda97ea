-- name: OutboxPurge :execrows
-- Deletes up to @max_count events published before @cutoff, oldest first,
-- through the pginbox_outbox_published partial index: one short statement
-- per batch. The receiving side's deduplication does not depend on these
-- rows; they are the outbox's history only. The batch is picked in a CTE,
-- evaluated once.
WITH batch AS (
    SELECT p.id
    FROM pginbox_outbox p
    WHERE p.status = 'PUBLISHED'
      AND p.published_at < sqlc.arg(cutoff)::timestamptz
    ORDER BY p.published_at
    LIMIT sqlc.arg(max_count)::integer
    FOR UPDATE SKIP LOCKED
)
DELETE FROM pginbox_outbox o
USING batch
WHERE o.id = batch.id;

-- name: OutboxPurgeCount :one
-- How many events a purge with @cutoff would delete now (for dry runs).
SELECT count(*)
FROM pginbox_outbox p
WHERE p.status = 'PUBLISHED'
  AND p.published_at < sqlc.arg(cutoff)::timestamptz;

-- name: OutboxPurgeScopes :many
-- Purge on Citus, step 1: the scopes with events published before @cutoff,
-- at most @max_scopes. A lock-free read of every shard; each scope is then
-- purged by OutboxPurgeScope on its node.
SELECT p.scope_id
FROM pginbox_outbox p
WHERE p.status = 'PUBLISHED'
  AND p.published_at < sqlc.arg(cutoff)::timestamptz
GROUP BY p.scope_id
ORDER BY min(p.published_at), p.scope_id
LIMIT sqlc.arg(max_scopes)::integer;

-- name: OutboxPurgeScope :execrows
-- Purge on Citus, step 2: OutboxPurge for one scope, @scope_id, on its node
-- alone.
WITH batch AS (
    SELECT p.id
    FROM pginbox_outbox p
    WHERE p.scope_id = sqlc.arg(scope_id)::text
      AND p.status = 'PUBLISHED'
      AND p.published_at < sqlc.arg(cutoff)::timestamptz
    ORDER BY p.published_at
    LIMIT sqlc.arg(max_count)::integer
    FOR UPDATE SKIP LOCKED
)
DELETE FROM pginbox_outbox o
USING batch
WHERE o.scope_id = sqlc.arg(scope_id)::text
  AND o.id = batch.id;
