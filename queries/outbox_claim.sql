-- name: OutboxClaim :many
-- Claims up to @max_count due events, oldest due first, for one relay. SKIP
-- LOCKED lets relays claim at once without waiting on each other; every claim
-- gets a fresh token that fences marking, failing and releasing it.
--
-- Ordering: an event with an ordering key is claimed only when every earlier
-- unpublished event of its key (lower seq, PENDING or PUBLISHING) is claimed
-- in this same statement. The test after locking (in the UPDATE) enforces it:
-- it drops events whose earlier ones another relay holds locked right now or
-- that are not in the batch. It reads the statement's snapshot, in which an
-- earlier event of the key is always visible (Emit's key lock makes seq the
-- commit order), and in which a claim another relay committed meanwhile still
-- looks PENDING: that blocks too. So at most one batch per key is in flight,
-- and the relay publishes it in seq order.
--
-- The test before locking keeps the batch useful: it skips, without locking
-- them, events whose key has an earlier event in flight or one that comes
-- later in the scan's order (a retry due after them, or not due yet). So an
-- event it lets through has every earlier event of its key ahead of it in
-- the scan, and a batch that holds an event also holds its key's first
-- unpublished event: each claim makes progress, and a retried event cannot
-- be crowded out by the later events of its key that wait for it.
WITH candidates AS (
    SELECT o.id
    FROM pginbox_outbox o
    WHERE o.status = 'PENDING'
      AND o.available_at <= now()
      AND (o.ordering_key = '' OR NOT EXISTS (
          SELECT 1
          FROM pginbox_outbox p
          WHERE p.ordering_key = o.ordering_key
            AND p.ordering_key <> ''
            AND p.status IN ('PENDING', 'PUBLISHING')
            AND p.seq < o.seq
            AND (p.status = 'PUBLISHING' OR p.available_at > o.available_at)))
    ORDER BY o.available_at, o.seq
    LIMIT sqlc.arg(max_count)::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE pginbox_outbox o
SET status = 'PUBLISHING',
    claim_token = gen_random_uuid(),
    lease_expires_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond',
    attempts = o.attempts + 1,
    version = o.version + 1,
    updated_at = now()
FROM candidates c
WHERE o.id = c.id
  AND (o.ordering_key = '' OR NOT EXISTS (
      SELECT 1
      FROM pginbox_outbox p
      WHERE p.ordering_key = o.ordering_key
        AND p.ordering_key <> ''
        AND p.status IN ('PENDING', 'PUBLISHING')
        AND p.seq < o.seq
        AND p.id NOT IN (SELECT id FROM candidates)))
RETURNING o.id, o.claim_token, o.seq, o.source, o.destination, o.ordering_key,
    o.event_type, o.schema_version, o.payload, o.metadata, o.attempts, o.created_at,
    o.scope_kind, o.scope_id;

-- name: OutboxDueScopes :many
-- The relay's claim on Citus, step 1: the scopes with due events, oldest due
-- first, at most @max_scopes. It runs on every shard at once (one task per
-- shard, on the due index) and locks nothing; the relay then claims from each
-- scope with OutboxClaimScope. A fan-out by design: no statement can lock
-- rows on several shards.
SELECT o.scope_kind, o.scope_id, min(o.available_at)::timestamptz AS oldest_due
FROM pginbox_outbox o
WHERE o.status = 'PENDING'
  AND o.available_at <= now()
GROUP BY o.scope_kind, o.scope_id
ORDER BY oldest_due, o.scope_id
LIMIT sqlc.arg(max_scopes)::integer;

-- name: OutboxClaimScope :many
-- The relay's claim on Citus, step 2: OutboxClaim for one scope, @scope_id.
-- Every table reference carries the scope, so the statement runs on the
-- scope's node alone and SKIP LOCKED works as on one server. The claim token
-- is a parameter (Citus refuses volatile functions in a routed UPDATE); one
-- token for the batch fences as well as one per event, since marking matches
-- the event ID too. The ordering tests are OutboxClaim's within the scope:
-- on Citus an ordering key orders the events of one scope (emits of one key
-- in different scopes take different locks, on different nodes).
WITH candidates AS (
    SELECT o.id
    FROM pginbox_outbox o
    WHERE o.scope_id = sqlc.arg(scope_id)::text
      AND o.status = 'PENDING'
      AND o.available_at <= now()
      AND (o.ordering_key = '' OR NOT EXISTS (
          SELECT 1
          FROM pginbox_outbox p
          WHERE p.scope_id = sqlc.arg(scope_id)::text
            AND p.ordering_key = o.ordering_key
            AND p.ordering_key <> ''
            AND p.status IN ('PENDING', 'PUBLISHING')
            AND p.seq < o.seq
            AND (p.status = 'PUBLISHING' OR p.available_at > o.available_at)))
    ORDER BY o.available_at, o.seq
    LIMIT sqlc.arg(max_count)::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE pginbox_outbox o
SET status = 'PUBLISHING',
    claim_token = sqlc.arg(claim_token)::uuid,
    lease_expires_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond',
    attempts = o.attempts + 1,
    version = o.version + 1,
    updated_at = now()
FROM candidates c
WHERE o.scope_id = sqlc.arg(scope_id)::text
  AND o.id = c.id
  AND (o.ordering_key = '' OR NOT EXISTS (
      SELECT 1
      FROM pginbox_outbox p
      WHERE p.scope_id = sqlc.arg(scope_id)::text
        AND p.ordering_key = o.ordering_key
        AND p.ordering_key <> ''
        AND p.status IN ('PENDING', 'PUBLISHING')
        AND p.seq < o.seq
        AND p.id NOT IN (SELECT id FROM candidates)))
RETURNING o.id, o.claim_token, o.seq, o.source, o.destination, o.ordering_key,
    o.event_type, o.schema_version, o.payload, o.metadata, o.attempts, o.created_at,
    o.scope_kind, o.scope_id;
