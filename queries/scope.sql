-- name: ScopeApply :exec
-- Sets the scope of the current transaction, which pginbox's row-level
-- security policies and the application's own read: @tenant is the tenant ID
-- or '', @global is 'on' for the global scope or ''. Transaction-local, so a
-- pooled connection never carries it into its next transaction.
SELECT set_config('pginbox.tenant', sqlc.arg(tenant)::text, true),
    set_config('pginbox.global', sqlc.arg(global)::text, true);

-- name: ScopeEnsure :one
-- The scope the current transaction already has, applying @tenant/@global when
-- it has none. The CTE is materialized so the settings are read before they
-- are set.
WITH prev AS MATERIALIZED (
    SELECT coalesce(current_setting('pginbox.tenant', true), '') AS tenant,
        coalesce(current_setting('pginbox.global', true), '') AS global
)
SELECT prev.tenant::text AS tenant, prev.global::text AS global,
    (CASE WHEN prev.tenant = '' AND prev.global <> 'on'
          THEN set_config('pginbox.tenant', sqlc.arg(apply_tenant)::text, true)
            || set_config('pginbox.global', sqlc.arg(apply_global)::text, true)
     END IS NOT NULL)::boolean AS applied
FROM prev;

-- name: ScopeRestricted :one
-- Whether row-level security holds the current role to one scope on
-- pginbox_receipts: it is enabled, the role is neither superuser nor BYPASSRLS,
-- and it does not own the table unless FORCE ROW LEVEL SECURITY is on too.
SELECT (c.relrowsecurity
    AND NOT (r.rolsuper OR r.rolbypassrls)
    AND (c.relforcerowsecurity OR NOT pg_has_role(c.relowner, 'USAGE')))::boolean AS restricted
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_roles r ON r.rolname = current_user
WHERE c.oid = 'pginbox_receipts'::regclass;

-- name: ScopeReset :exec
-- Clears a scope set at session level (SET pginbox.tenant, set_config(...,
-- false)), which would otherwise outlive the transaction and reach whoever
-- uses the pooled connection next. ApplyScope never sets one.
SELECT set_config('pginbox.tenant', '', false), set_config('pginbox.global', '', false);

-- name: ScopePropagate :exec
-- On Citus: the SET LOCAL commands after it in the transaction reach the
-- worker nodes, where the row-level security policies are evaluated.
-- set_config (ScopeApply) never does, and SET takes no parameters, so on
-- Citus the scope is sent as SET LOCAL statements built in Go with the
-- values quoted (inbox/scope_citus.go), after this one.
SET LOCAL citus.propagate_set_commands = 'local';
