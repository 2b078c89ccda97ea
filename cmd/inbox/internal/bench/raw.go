package bench

// The raw ceiling issues these statements from plain pgx loops, with no pginbox
// code. They are the statements pginbox sends (queries/accept.sql,
// queries/accept_batch.sql, queries/complete.sql), written out here so the raw
// side cannot silently pick up a change to them: keep them in step by hand.

// rawAcceptTail is the rest of an accept after the receipt's insert: its queue
// row.
const rawAcceptTail = `
    ON CONFLICT (scope_kind, scope_id, source, consumer, message_id) WHERE replay_of IS NULL
    DO NOTHING
    RETURNING id, scope_kind, scope_id, consumer, max_attempts
), queued AS (
    INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts)
    SELECT id, scope_kind, scope_id, consumer, max_attempts FROM inserted
    RETURNING receipt_id, consumer, status
)`

const rawAcceptHead = `WITH inserted AS (
    INSERT INTO pginbox_receipts (
        id, scope_kind, scope_id, source, consumer, message_id,
        event_type, schema_version, fingerprint, payload, metadata, max_attempts
    ) VALUES (
        $1, $2, $3, $4, $5, $6,
        $7, $8, $9, $10, $11, $12
    )`

// rawNotifyAcceptSQL is the accept statement with the wake-up notify in it, as
// every accept would send it without coalescing: shown to measure what
// per-accept NOTIFY costs.
const rawNotifyAcceptSQL = rawAcceptHead + rawAcceptTail + `
SELECT q.receipt_id AS id, q.status, pg_notify('pginbox_receipt', q.consumer) IS NOT NULL AS notified
FROM queued q`

// rawAcceptSQL is pginbox's single accept statement (ReceiptAccept) as most
// accepts send it: the plain inserts, its wake-up coalesced with others'. It is
// the single-statement ceiling.
const rawAcceptSQL = rawAcceptHead + rawAcceptTail + `
SELECT q.receipt_id AS id, q.status FROM queued q`

// rawByIdentitySQL reads the existing receipt of a duplicate (ReceiptByIdentity).
const rawByIdentitySQL = `SELECT r.id, coalesce(w.status, r.status), r.fingerprint
FROM pginbox_receipts r
LEFT JOIN pginbox_work w
  ON w.receipt_id = r.id AND w.scope_kind = r.scope_kind AND w.scope_id = r.scope_id
WHERE r.scope_kind = $1
  AND r.scope_id = $2
  AND r.source = $3
  AND r.consumer = $4
  AND r.message_id = $5
  AND r.replay_of IS NULL`

// rawBatchSQL is pginbox's multi-row accept (ReceiptAcceptBatch) as most batches
// send it: without the inline wake-up, which is coalesced with other accepts'.
const rawBatchSQL = `WITH inserted AS (
    INSERT INTO pginbox_receipts (
        id, scope_kind, scope_id, source, consumer, message_id,
        event_type, schema_version, fingerprint, payload, metadata, max_attempts
    )
    SELECT
        unnest($1::text[])::uuid,
        unnest($2::text[]),
        unnest($3::text[]),
        unnest($4::text[]),
        unnest($5::text[]),
        unnest($6::text[]),
        unnest($7::text[]),
        unnest($8::integer[]),
        unnest($9::bytea[]),
        unnest($10::text[])::json,
        unnest($11::text[])::jsonb,
        $12::integer` + rawAcceptTail + `
SELECT queued.receipt_id FROM queued`

// rawEffectSQL is the drain handler's business write.
const rawEffectSQL = `INSERT INTO ` + effectsTable + ` (receipt_id, message_id) VALUES ($1, $2)`

// rawCompleteSQL is the completion (ReceiptStart), guarded by status instead
// of a claim token because the raw loop does not claim.
const rawCompleteSQL = `WITH done AS (
    DELETE FROM pginbox_work w
    WHERE w.receipt_id = $1 AND w.status = 'PENDING'
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
RETURNING r.id, r.payload, r.metadata`

// rawClaimSQL is the relay's claim (OutboxClaim), returning only what the
// raw loop publishes: the ID, the claim token and the payload.
const rawClaimSQL = `WITH candidates AS (
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
    LIMIT $2::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE pginbox_outbox o
SET status = 'PUBLISHING',
    claim_token = gen_random_uuid(),
    lease_expires_at = now() + $1::bigint * interval '1 millisecond',
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
RETURNING o.id, o.claim_token, o.payload`

// rawMarkSQL is the relay's fenced mark (OutboxMarkPublished).
const rawMarkSQL = `UPDATE pginbox_outbox o
SET status = 'PUBLISHED',
    published_at = now(),
    claim_token = NULL,
    lease_expires_at = NULL,
    last_error = NULL,
    updated_at = now(),
    version = o.version + 1
FROM (
    SELECT unnest($1::text[])::uuid AS id,
           unnest($2::text[])::uuid AS token
) AS held
WHERE o.id = held.id AND o.claim_token = held.token
RETURNING o.id`
