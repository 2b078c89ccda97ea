-- name: OutboxMarkPublished :many
-- Marks published events, fenced by their claim tokens: a relay whose claim
-- was recovered or re-claimed elsewhere marks nothing (the event is published
-- again, and the receiver deduplicates it by its ID). The set-returning
-- functions in one select list advance in lockstep, zipping the arrays; IDs
-- travel as text for the simple protocol.
UPDATE pginbox_outbox o
SET status = 'PUBLISHED',
    published_at = now(),
    claim_token = NULL,
    lease_expires_at = NULL,
    last_error = NULL,
    updated_at = now(),
    version = o.version + 1
FROM (
    SELECT unnest(sqlc.arg(ids)::text[])::uuid AS id,
           unnest(sqlc.arg(tokens)::text[])::uuid AS token
) AS held
-- The token alone fences: only PUBLISHING rows have one (a CHECK enforces it).
WHERE o.id = held.id AND o.claim_token = held.token
RETURNING o.id;

-- name: OutboxFail :many
-- Records failed publish attempts, fenced by their tokens: DEAD when the
-- publisher said retrying cannot help or the attempts reached
-- @max_attempts, otherwise PENDING again after the event's delay (persisted,
-- so a restarted relay keeps the backoff).
UPDATE pginbox_outbox o
SET status = CASE WHEN f.dead OR o.attempts >= sqlc.arg(max_attempts)::integer
                  THEN 'DEAD' ELSE 'PENDING' END,
    available_at = now() + f.delay_ms * interval '1 millisecond',
    last_error = f.error,
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = now(),
    version = o.version + 1
FROM (
    SELECT unnest(sqlc.arg(ids)::text[])::uuid AS id,
           unnest(sqlc.arg(tokens)::text[])::uuid AS token,
           unnest(sqlc.arg(errors)::text[]) AS error,
           unnest(sqlc.arg(delays_ms)::bigint[]) AS delay_ms,
           unnest(sqlc.arg(dead)::boolean[]) AS dead
) AS f
WHERE o.id = f.id AND o.claim_token = f.token
RETURNING o.id, o.status, o.available_at;

-- name: OutboxRelease :execrows
-- Hands back claimed events that were not attempted (an earlier event of
-- their key failed in the same batch, or the relay is shutting down) without
-- spending an attempt. They stay due; the claim's ordering test holds them
-- back while an earlier event of their key waits for its retry.
UPDATE pginbox_outbox o
SET status = 'PENDING',
    attempts = o.attempts - 1,
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = now(),
    version = o.version + 1
FROM (
    SELECT unnest(sqlc.arg(ids)::text[])::uuid AS id,
           unnest(sqlc.arg(tokens)::text[])::uuid AS token
) AS held
WHERE o.id = held.id AND o.claim_token = held.token;

-- name: OutboxMarkPublishedScope :many
-- OutboxMarkPublished for the events of one scope, @scope_id: on Citus it
-- runs on the scope's node alone. Each ID's token is the one at its position
-- (WITH ORDINALITY: Citus refuses the zipping set-returning functions of one
-- select list).
UPDATE pginbox_outbox o
SET status = 'PUBLISHED',
    published_at = now(),
    claim_token = NULL,
    lease_expires_at = NULL,
    last_error = NULL,
    updated_at = now(),
    version = o.version + 1
FROM unnest(sqlc.arg(ids)::text[]) WITH ORDINALITY AS held (id, n)
WHERE o.scope_id = sqlc.arg(scope_id)::text
  AND o.id = held.id::uuid AND o.claim_token = (sqlc.arg(tokens)::text[])[held.n]::uuid
RETURNING o.id;

-- name: OutboxFailScope :many
-- OutboxFail for the events of one scope, @scope_id, on its node alone. The
-- retry times come computed (@available_at, the relay's clock): Citus refuses
-- a time computed from a column in a routed UPDATE. The arrays are joined by
-- position into columns: an array subscript in SET crashes Citus 13's
-- coordinator.
UPDATE pginbox_outbox o
SET status = CASE WHEN f.dead OR o.attempts >= sqlc.arg(max_attempts)::integer
                  THEN 'DEAD' ELSE 'PENDING' END,
    available_at = f.available_at,
    last_error = f.error,
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = now(),
    version = o.version + 1
FROM (
    SELECT i.id, t.token, e.error, a.available_at, d.dead
    FROM unnest(sqlc.arg(ids)::text[]) WITH ORDINALITY AS i (id, n)
    JOIN unnest(sqlc.arg(tokens)::text[]) WITH ORDINALITY AS t (token, n) ON t.n = i.n
    JOIN unnest(sqlc.arg(errors)::text[]) WITH ORDINALITY AS e (error, n) ON e.n = i.n
    JOIN unnest(sqlc.arg(available_at)::timestamptz[]) WITH ORDINALITY AS a (available_at, n) ON a.n = i.n
    JOIN unnest(sqlc.arg(dead)::boolean[]) WITH ORDINALITY AS d (dead, n) ON d.n = i.n
) AS f
WHERE o.scope_id = sqlc.arg(scope_id)::text
  AND o.id = f.id::uuid AND o.claim_token = f.token::uuid
RETURNING o.id, o.status, o.available_at;

-- name: OutboxReleaseScope :execrows
-- OutboxRelease for the events of one scope, @scope_id, on its node alone.
UPDATE pginbox_outbox o
SET status = 'PENDING',
    attempts = o.attempts - 1,
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = now(),
    version = o.version + 1
FROM unnest(sqlc.arg(ids)::text[]) WITH ORDINALITY AS held (id, n)
WHERE o.scope_id = sqlc.arg(scope_id)::text
  AND o.id = held.id::uuid AND o.claim_token = (sqlc.arg(tokens)::text[])[held.n]::uuid;
