-- name: ReceiptStart :many
-- Runs first in a handler's transaction: completes the claimed receipts the
-- worker still holds, fenced by their tokens, and returns their payloads. The
-- queue rows are deleted and the receipts marked COMPLETED (a HOT update: no
-- index covers what changes). The row locks keep every other worker, recovery
-- and admin change away until the transaction ends; the handlers then run in
-- it, and their writes commit together with the completions or roll back with
-- them. A receipt missing from the result was lost (recovered or re-claimed
-- elsewhere): its handler must not run. The server process running the
-- transaction is read by a statement of its own in the same round trip
-- (scopedDB with a pid): on Citus a function in a routed statement would run
-- on the worker. Each ID's token is the one at its position (WITH
-- ORDINALITY; Citus refuses the zipping set-returning functions of one select
-- list); IDs travel as text for the simple protocol.
-- The receipts share one scope, @scope_id, and every table reference carries
-- it: on Citus the transaction stays on the scope's node. The consumer and
-- ordering key tell the worker which keys' next receipts to promote
-- (ReceiptPromote) before it commits. The token says which claim completed:
-- a receipt recovered and claimed again by the same worker can be in one
-- batch twice, under its stale token and its new one, and only the new
-- claim's handler may run.
WITH done AS (
    DELETE FROM pginbox_work w
    USING unnest(sqlc.arg(ids)::text[]) WITH ORDINALITY AS held (id, n)
    -- The token alone fences: only PROCESSING rows have one (a CHECK enforces it).
    WHERE w.scope_id = sqlc.arg(scope_id)::text
      AND w.receipt_id = held.id::uuid AND w.claim_token = (sqlc.arg(tokens)::text[])[held.n]::uuid
    RETURNING w.receipt_id, w.scope_kind, w.scope_id, w.attempts, w.version, w.claim_token
)
UPDATE pginbox_receipts r
SET status = 'COMPLETED',
    attempts = done.attempts,
    last_error = NULL,
    completed_at = now(),
    updated_at = now(),
    version = done.version + 1
FROM done
WHERE r.scope_id = sqlc.arg(scope_id)::text
  AND r.id = done.receipt_id AND r.scope_kind = done.scope_kind AND r.scope_id = done.scope_id
RETURNING r.id, done.claim_token, r.payload, r.metadata, r.consumer, r.ordering_key;
