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
