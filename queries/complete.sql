-- name: ReceiptStart :many
-- Runs first in a handler's transaction: completes the claimed receipts the
-- worker still holds, fenced by their tokens, and returns their payloads. The
-- queue rows are deleted and the receipts marked COMPLETED (a HOT update: no
-- index covers what changes). The row locks keep every other worker, recovery
-- and admin change away until the transaction ends; the handlers then run in
-- it, and their writes commit together with the completions or roll back with
-- them. A receipt missing from the result was lost (recovered or re-claimed
-- elsewhere): its handler must not run. backend_pid is the server process
-- running the transaction (also behind a pooler), for ending it if its
-- handler hangs. The set-returning functions in one select list advance in
-- lockstep, zipping the arrays; IDs travel as text for the simple protocol.
WITH held AS (
    SELECT unnest(sqlc.arg(ids)::text[])::uuid AS id,
           unnest(sqlc.arg(tokens)::text[])::uuid AS token
), done AS (
    DELETE FROM pginbox_work w
    USING held
    -- The token alone fences: only PROCESSING rows have one (a CHECK enforces it).
    WHERE w.receipt_id = held.id AND w.claim_token = held.token
    RETURNING w.receipt_id, w.scope_kind, w.scope_id, w.attempts, w.version
)
UPDATE pginbox_receipts r
SET status = 'COMPLETED',
    attempts = done.attempts,
    last_error = NULL,
    completed_at = now(),
    updated_at = now(),
    version = done.version + 1
FROM done
WHERE r.id = done.receipt_id AND r.scope_kind = done.scope_kind AND r.scope_id = done.scope_id
RETURNING r.id, r.payload, r.metadata, pg_backend_pid() AS backend_pid;
