-- Schema v3: payloads are stored as the canonical JSON text itself (type json,
-- which keeps text as given) instead of jsonb. Handlers and the admin API then
-- get exactly the canonical form the fingerprint covers, and reading a payload
-- never re-renders it: jsonb prints numbers in full plain decimal, so a short
-- number like 1e131071 comes back as 131,072 digits.
--
-- Fingerprints are unchanged, so v2 receipts keep deduplicating. Their payload
-- text becomes jsonb's rendering of it (same JSON value, other spacing and key
-- order). The column type change rewrites the table under an exclusive lock:
-- run it in a quiet period on large tables.
--
-- A v2 row may hold a payload accepted before the accept-time number limits
-- (8,201 copies of 1e131071, say): small as jsonb, whose numeric keeps the
-- exponent, but jsonb prints every digit, and more than 1 GB of text cannot
-- be stored (out of memory, SQLSTATE 54000). Rather than wedge the upgrade,
-- such a receipt is quarantined: its payload is dropped (marked purged) with
-- the reason in last_error, a receipt still to be handled goes DEAD, a
-- handled one stays COMPLETED, and its identity and fingerprint stay, so a
-- redelivery is still a duplicate. Each one is named in a NOTICE. The search
-- runs only when the conversion failed, so other upgrades cost what they did.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    r record;
BEGIN
    BEGIN
        ALTER TABLE pginbox_receipts ALTER COLUMN payload TYPE json USING payload::text::json;
        RETURN;
    EXCEPTION WHEN program_limit_exceeded OR out_of_memory THEN
        RAISE NOTICE 'pginbox v3: a payload cannot be stored as JSON text (%): looking for it row by row', SQLERRM;
    END;
    FOR r IN SELECT id FROM pginbox_receipts WHERE payload IS NOT NULL ORDER BY id LOOP
        BEGIN
            PERFORM octet_length(p.payload::text) FROM pginbox_receipts p WHERE p.id = r.id;
        EXCEPTION WHEN program_limit_exceeded OR out_of_memory THEN
            UPDATE pginbox_receipts
            SET payload = NULL,
                payload_purged_at = now(),
                status = CASE WHEN status = 'COMPLETED' THEN 'COMPLETED' ELSE 'DEAD' END,
                claim_token = NULL,
                lease_expires_at = NULL,
                last_error = 'pginbox: schema v3 could not store this payload as JSON text (' || SQLERRM || '): '
                    || 'its numbers print as more digits than a text value holds; it was accepted before the '
                    || 'accept-time number limits, which refuse it now. The payload was dropped; identity and '
                    || 'fingerprint are kept, so a redelivery is still a duplicate',
                version = version + 1,
                updated_at = now()
            WHERE id = r.id;
            RAISE NOTICE 'pginbox v3: receipt % quarantined: its payload cannot be stored as JSON text, so it was dropped (see its last_error)', r.id;
        END;
    END LOOP;
    ALTER TABLE pginbox_receipts ALTER COLUMN payload TYPE json USING payload::text::json;
END
$$;
-- +goose StatementEnd

-- The conversion above ran inside the DO block; this states the column's
-- type where sqlc reads the schema (already json: no rewrite).
ALTER TABLE pginbox_receipts ALTER COLUMN payload TYPE json;

-- +goose Down
-- Canonical payloads never hold what jsonb refuses (duplicate keys, \u0000,
-- numbers out of numeric's range), so the conversion back cannot fail on them.
ALTER TABLE pginbox_receipts ALTER COLUMN payload TYPE jsonb USING payload::jsonb;
