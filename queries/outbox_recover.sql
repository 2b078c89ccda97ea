-- name: OutboxRecover :many
-- Returns events whose lease expired (their relay died or hung between claim
-- and mark) to PENDING, due now, or DEAD when their attempts reached
-- @max_attempts. Safe to run from every relay: SKIP LOCKED, no leader.
WITH expired AS (
    SELECT e.id
    FROM pginbox_outbox e
    WHERE e.status = 'PUBLISHING'
      AND e.lease_expires_at < now()
    ORDER BY e.lease_expires_at
    LIMIT sqlc.arg(max_count)::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE pginbox_outbox o
SET status = CASE WHEN o.attempts >= sqlc.arg(max_attempts)::integer THEN 'DEAD' ELSE 'PENDING' END,
    last_error = 'lease expired: the relay stopped between claiming and marking the event (crash, network loss, or a publish that outlived its lease); it may have been published',
    claim_token = NULL,
    lease_expires_at = NULL,
    available_at = now(),
    updated_at = now(),
    version = o.version + 1
FROM expired
WHERE o.id = expired.id
RETURNING o.id, o.status;

-- name: OutboxExpiredScopes :many
-- Lease recovery on Citus, step 1: the scopes with expired leases, at most
-- @max_scopes. A lock-free read of every shard (on the lease index); each
-- scope is then recovered by OutboxRecoverScope on its node.
SELECT e.scope_id
FROM pginbox_outbox e
WHERE e.status = 'PUBLISHING'
  AND e.lease_expires_at < now()
GROUP BY e.scope_id
ORDER BY min(e.lease_expires_at), e.scope_id
LIMIT sqlc.arg(max_scopes)::integer;

-- name: OutboxRecoverScope :many
-- Lease recovery on Citus, step 2: OutboxRecover for one scope, @scope_id,
-- on its node alone.
WITH expired AS (
    SELECT e.id
    FROM pginbox_outbox e
    WHERE e.scope_id = sqlc.arg(scope_id)::text
      AND e.status = 'PUBLISHING'
      AND e.lease_expires_at < now()
    ORDER BY e.lease_expires_at
    LIMIT sqlc.arg(max_count)::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE pginbox_outbox o
SET status = CASE WHEN o.attempts >= sqlc.arg(max_attempts)::integer THEN 'DEAD' ELSE 'PENDING' END,
    last_error = 'lease expired: the relay stopped between claiming and marking the event (crash, network loss, or a publish that outlived its lease); it may have been published',
    claim_token = NULL,
    lease_expires_at = NULL,
    available_at = now(),
    updated_at = now(),
    version = o.version + 1
FROM expired
WHERE o.scope_id = sqlc.arg(scope_id)::text
  AND o.id = expired.id
RETURNING o.id, o.status;
