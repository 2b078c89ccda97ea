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

-- +goose Up
ALTER TABLE pginbox_receipts ALTER COLUMN payload TYPE json USING payload::text::json;

-- +goose Down
-- Canonical payloads never hold what jsonb refuses (duplicate keys, \u0000,
-- numbers out of numeric's range), so the conversion back cannot fail on them.
ALTER TABLE pginbox_receipts ALTER COLUMN payload TYPE jsonb USING payload::jsonb;
