-- name: OutboxGet :one
-- One event with its payload and metadata, of the scope @scope_kind and
-- @scope_id (on Citus: on its node alone), or with @all_scopes of any scope
-- (the operator's view: on Citus it reads every shard).
SELECT *
FROM pginbox_outbox
WHERE id = @id
  AND (sqlc.arg(all_scopes)::boolean
       OR (scope_kind = sqlc.arg(scope_kind)::text AND scope_id = sqlc.arg(scope_id)::text));

-- name: OutboxList :many
-- One page of events in ID order (creation order: IDs are ULIDs), after the
-- cursor @after, with optional filters. Payloads are not read.
SELECT id, seq, source, destination, ordering_key, event_type, schema_version,
    status, attempts, available_at, claim_token, lease_expires_at, last_error,
    version, created_at, updated_at, published_at
FROM pginbox_outbox o
WHERE (sqlc.narg(after)::uuid IS NULL OR o.id > sqlc.narg(after)::uuid)
  AND (cardinality(sqlc.arg(statuses)::text[]) = 0 OR o.status = ANY (sqlc.arg(statuses)::text[]))
  AND (sqlc.arg(destination)::text = '' OR o.destination = sqlc.arg(destination)::text)
  AND (sqlc.arg(ordering_key)::text = '' OR o.ordering_key = sqlc.arg(ordering_key)::text)
ORDER BY o.id
LIMIT sqlc.arg(max_count)::integer;

-- name: OutboxStats :many
-- Counts of the events that are not PUBLISHED per destination and status, and
-- the due ones' count and oldest available_at. It reads only the partial
-- indexes' rows, so it does not slow down as published history grows.
SELECT destination,
    status,
    count(*) AS total,
    count(*) FILTER (WHERE status = 'PENDING' AND attempts > 0) AS retrying,
    count(*) FILTER (WHERE status = 'PENDING' AND available_at <= now()) AS due,
    coalesce((extract(epoch FROM now() - min(available_at)
        FILTER (WHERE status = 'PENDING' AND available_at <= now())) * 1000)::bigint, 0)::bigint AS oldest_due_ms
FROM pginbox_outbox
WHERE status <> 'PUBLISHED'
GROUP BY destination, status
ORDER BY destination, status;

-- name: OutboxStatsPublished :many
-- PUBLISHED events per destination. This scans the retained history, so it
-- is opt-in.
SELECT destination, count(*) AS total
FROM pginbox_outbox
WHERE status = 'PUBLISHED'
GROUP BY destination
ORDER BY destination;

-- name: OutboxRequeue :one
-- Sends a DEAD event back to PENDING with a fresh retry budget, due now, if
-- it is still at @expected_version. No row means the caller reads the event
-- again to say why (not found, other version, other status). The event's
-- scope, @scope_id, is given (Admin reads it first when it has none), so on
-- Citus the statement runs on the scope's node alone.
UPDATE pginbox_outbox
SET status = 'PENDING',
    attempts = 0,
    available_at = now(),
    updated_at = now(),
    version = version + 1
WHERE scope_id = sqlc.arg(scope_id)::text
  AND id = @id
  AND version = @expected_version
  AND status = 'DEAD'
RETURNING version;
