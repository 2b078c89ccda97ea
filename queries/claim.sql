-- name: ReceiptClaim :many
-- Claims up to @max_count due receipts of the given consumers, serving the
-- scopes with due work in turns, so one tenant's backlog cannot hold another
-- tenant's messages behind it. SKIP LOCKED lets any number of workers claim
-- at once without waiting on each other. Only the queue rows change:
-- @claim_token (made by the worker, one per claim) fences the completion and
-- failure updates, together with the ID. Payloads are not returned: the
-- handler's transaction loads them (ReceiptStart), so a payload the server
-- cannot produce fails that receipt's attempt alone.
--
-- The turns: per consumer, the walk visits the scopes after the cursor
-- (@after_scope_kind, @after_scope_id; the worker passes the last scope it
-- was served, '' to start over) in index order, one descent of the due index
-- per scope, at most @max_walk per consumer, and then, from the first scope,
-- those up to the cursor (wrap: the turn goes round in one statement). The
-- first index entry of a scope holds its oldest available_at, so the walk
-- sees whether the scope has due work without reading its rows. The first
-- @max_scopes scopes with due work, in walk order (walk before wrap: a UNION
-- ALL under LIMIT is read child by child, and wrap is read only when walk
-- runs short), each get an equal share of @max_count (returned as share: a
-- scope that filled its share may have more), oldest first within the scope.
--
-- The worker runs it on a generic plan (planning it cost more than running
-- it), made with sequential scans and hash joins off (pipetx.ForceGenericPlan).
-- The claimed rows are found by ID arrays (= ANY), so the plan stays on the
-- primary keys whatever the generic plan guesses for LIMIT @max_count: a join
-- would be planned for a tenth of the table, as a hash join over it.
WITH RECURSIVE walk AS (
    SELECT c.name AS consumer, f.scope_kind, f.scope_id, f.available_at, 1 AS depth
    FROM unnest(sqlc.arg(consumers)::text[]) AS c (name)
    CROSS JOIN LATERAL (
        SELECT w.scope_kind, w.scope_id, w.available_at
        FROM pginbox_work w
        WHERE w.consumer = c.name
          AND w.status IN ('PENDING', 'RETRYABLE')
          AND (w.scope_kind, w.scope_id) > (sqlc.arg(after_scope_kind)::text, sqlc.arg(after_scope_id)::text)
        ORDER BY w.scope_kind, w.scope_id, w.available_at
        LIMIT 1
    ) f
    UNION ALL
    SELECT s.consumer, n.scope_kind, n.scope_id, n.available_at, s.depth + 1
    FROM walk s
    CROSS JOIN LATERAL (
        SELECT w.scope_kind, w.scope_id, w.available_at
        FROM pginbox_work w
        WHERE w.consumer = s.consumer
          AND w.status IN ('PENDING', 'RETRYABLE')
          AND (w.scope_kind, w.scope_id) > (s.scope_kind, s.scope_id)
        ORDER BY w.scope_kind, w.scope_id, w.available_at
        LIMIT 1
    ) n
    WHERE s.depth < sqlc.arg(max_walk)::integer
), wrap AS (
    -- From the first scope on, stopping at the cursor. No upper bound in the
    -- index condition: a row comparison bounds the scan on its first column
    -- only, so a bound would read every entry of the scopes after the
    -- cursor before finding none. The step past the cursor is filtered out.
    SELECT c.name AS consumer, f.scope_kind, f.scope_id, f.available_at, 1 AS depth
    FROM unnest(sqlc.arg(consumers)::text[]) AS c (name)
    CROSS JOIN LATERAL (
        SELECT w.scope_kind, w.scope_id, w.available_at
        FROM pginbox_work w
        WHERE w.consumer = c.name
          AND w.status IN ('PENDING', 'RETRYABLE')
        ORDER BY w.scope_kind, w.scope_id, w.available_at
        LIMIT 1
    ) f
    UNION ALL
    SELECT s.consumer, n.scope_kind, n.scope_id, n.available_at, s.depth + 1
    FROM wrap s
    CROSS JOIN LATERAL (
        SELECT w.scope_kind, w.scope_id, w.available_at
        FROM pginbox_work w
        WHERE w.consumer = s.consumer
          AND w.status IN ('PENDING', 'RETRYABLE')
          AND (w.scope_kind, w.scope_id) > (s.scope_kind, s.scope_id)
        ORDER BY w.scope_kind, w.scope_id, w.available_at
        LIMIT 1
    ) n
    WHERE s.depth < sqlc.arg(max_walk)::integer
      AND (s.scope_kind, s.scope_id) < (sqlc.arg(after_scope_kind)::text, sqlc.arg(after_scope_id)::text)
), served AS (
    SELECT t.consumer, t.scope_kind, t.scope_id
    FROM (
        SELECT s.consumer, s.scope_kind, s.scope_id FROM walk s WHERE s.available_at <= now()
        UNION ALL
        SELECT s.consumer, s.scope_kind, s.scope_id FROM wrap s
        WHERE s.available_at <= now()
          AND (s.scope_kind, s.scope_id) <= (sqlc.arg(after_scope_kind)::text, sqlc.arg(after_scope_id)::text)
    ) t
    LIMIT sqlc.arg(max_scopes)::integer
), share AS (
    SELECT greatest(1, ceil(sqlc.arg(max_count)::integer::numeric / greatest(count(*), 1)))::integer AS n
    FROM served
), due AS (
    SELECT d.receipt_id, d.available_at
    FROM served s
    CROSS JOIN share
    CROSS JOIN LATERAL (
        SELECT w.receipt_id, w.available_at
        FROM pginbox_work w
        WHERE w.consumer = s.consumer
          AND w.scope_kind = s.scope_kind
          AND w.scope_id = s.scope_id
          AND w.status IN ('PENDING', 'RETRYABLE')
          AND w.available_at <= now()
        ORDER BY w.available_at
        LIMIT share.n
        FOR UPDATE SKIP LOCKED
    ) d
    ORDER BY d.available_at
    LIMIT sqlc.arg(max_count)::integer
), claimed AS (
    UPDATE pginbox_work w
    SET status = 'PROCESSING',
        claim_token = sqlc.arg(claim_token)::uuid,
        lease_expires_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond',
        attempts = w.attempts + 1,
        version = w.version + 1,
        updated_at = now()
    WHERE w.receipt_id = ANY (ARRAY(SELECT due.receipt_id FROM due))
    RETURNING w.receipt_id, w.scope_kind, w.scope_id, w.claim_token, w.attempts, w.max_attempts
)
SELECT r.id, c.claim_token, r.scope_kind, r.scope_id, r.source, r.consumer,
    r.message_id, r.event_type, r.schema_version, c.attempts, c.max_attempts,
    r.created_at, (SELECT n FROM share) AS share
FROM claimed c
JOIN pginbox_receipts r
  ON r.id = c.receipt_id AND r.scope_kind = c.scope_kind AND r.scope_id = c.scope_id
WHERE r.id = ANY (ARRAY(SELECT c2.receipt_id FROM claimed c2));
