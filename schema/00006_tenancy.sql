-- Schema v6: tenancy the database can enforce. This migration defines the
-- row-level security policies and leaves them inert: a table's policies apply
-- only once row-level security is enabled on it, which is a deliberate step of
-- its own (`inbox tenancy enable`, schema.EnableTenancy). Deployments that never
-- enable it behave as before.
--
-- The policies read two transaction-local settings that pginbox sets in every
-- transaction it opens for a scope (inbox.ApplyScope):
--   pginbox.tenant  the tenant ID, or '' outside a tenant;
--   pginbox.global  'on' where the global scope is in effect.
-- A transaction without either sees and writes nothing. Application policies on
-- business tables use the same setting: current_setting('pginbox.tenant', true).
--
-- The outbox gains the scope of the transaction that emits an event (its
-- column defaults read the same setting), so one tenant's handler cannot emit
-- under another tenant, and RLS can cover the outbox too.

-- +goose Up
-- Workers may be running: lock what this step changes before changing
-- anything, waiting for pginbox_receipts alone and taking the rest without
-- waiting (schema/migrate_locks.go says why; the migrator retries when one
-- is busy).
LOCK TABLE pginbox_receipts IN ACCESS EXCLUSIVE MODE;
LOCK TABLE pginbox_work, pginbox_audit, pginbox_outbox IN ACCESS EXCLUSIVE MODE NOWAIT;

ALTER TABLE pginbox_outbox
    ADD COLUMN scope_kind text NOT NULL DEFAULT (
        CASE WHEN coalesce(current_setting('pginbox.tenant', true), '') = '' THEN 'global' ELSE 'tenant' END),
    ADD COLUMN scope_id text NOT NULL DEFAULT coalesce(current_setting('pginbox.tenant', true), ''),
    ADD CONSTRAINT pginbox_outbox_scope_check CHECK (
        (scope_kind = 'global' AND scope_id = '')
        OR (scope_kind = 'tenant' AND scope_id <> '')
    );

-- A tenant's list walks its own receipts in ID order instead of filtering a
-- primary-key scan over every tenant's history. No column here ever changes,
-- so completions stay HOT.
CREATE INDEX pginbox_receipts_scope ON pginbox_receipts (scope_kind, scope_id, id);

CREATE POLICY pginbox_scope ON pginbox_receipts
    USING ((scope_kind = 'tenant' AND scope_id = current_setting('pginbox.tenant', true))
        OR (scope_kind = 'global' AND current_setting('pginbox.global', true) = 'on'))
    WITH CHECK ((scope_kind = 'tenant' AND scope_id = current_setting('pginbox.tenant', true))
        OR (scope_kind = 'global' AND current_setting('pginbox.global', true) = 'on'));

CREATE POLICY pginbox_scope ON pginbox_work
    USING ((scope_kind = 'tenant' AND scope_id = current_setting('pginbox.tenant', true))
        OR (scope_kind = 'global' AND current_setting('pginbox.global', true) = 'on'))
    WITH CHECK ((scope_kind = 'tenant' AND scope_id = current_setting('pginbox.tenant', true))
        OR (scope_kind = 'global' AND current_setting('pginbox.global', true) = 'on'));

CREATE POLICY pginbox_scope ON pginbox_outbox
    USING ((scope_kind = 'tenant' AND scope_id = current_setting('pginbox.tenant', true))
        OR (scope_kind = 'global' AND current_setting('pginbox.global', true) = 'on'))
    WITH CHECK ((scope_kind = 'tenant' AND scope_id = current_setting('pginbox.tenant', true))
        OR (scope_kind = 'global' AND current_setting('pginbox.global', true) = 'on'));

-- An audit row belongs to its receipt's scope: the subquery is itself
-- filtered by the receipts' policy.
CREATE POLICY pginbox_scope ON pginbox_audit
    USING (EXISTS (SELECT 1 FROM pginbox_receipts r WHERE r.id = receipt_id))
    WITH CHECK (EXISTS (SELECT 1 FROM pginbox_receipts r WHERE r.id = receipt_id));

-- +goose Down
-- Workers may be running: lock what this step changes before changing
-- anything, waiting for pginbox_receipts alone and taking the rest without
-- waiting (schema/migrate_locks.go says why; the migrator retries when one
-- is busy).
LOCK TABLE pginbox_receipts IN ACCESS EXCLUSIVE MODE;
LOCK TABLE pginbox_work, pginbox_audit, pginbox_outbox IN ACCESS EXCLUSIVE MODE NOWAIT;

ALTER TABLE pginbox_receipts NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
ALTER TABLE pginbox_work NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
ALTER TABLE pginbox_audit NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
ALTER TABLE pginbox_outbox NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
DROP POLICY pginbox_scope ON pginbox_audit;
DROP POLICY pginbox_scope ON pginbox_outbox;
DROP POLICY pginbox_scope ON pginbox_work;
DROP POLICY pginbox_scope ON pginbox_receipts;
DROP INDEX pginbox_receipts_scope;
ALTER TABLE pginbox_outbox
    DROP CONSTRAINT pginbox_outbox_scope_check,
    DROP COLUMN scope_id,
    DROP COLUMN scope_kind;
