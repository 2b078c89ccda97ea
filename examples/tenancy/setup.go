// Package tenancy is a small service whose tenants PostgreSQL keeps apart: its
// business table has a row-level security policy on pginbox's tenant setting,
// the application (accepts, handlers, API) connects as a restricted role, and
// only the worker's claims run as a system role with BYPASSRLS. See
// docs/TENANCY.md.
package tenancy

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/schema"
)

//go:embed schema.sql
var schemaSQL string

// Setup applies schema.sql, grants the application role (appRole) the
// business table and pginbox's tables, grants the system role (systemRole)
// pginbox's tables with BYPASSRLS, and enables row-level security on
// pginbox's tables. Run it once, on a connection of the tables' owner, after
// `inbox migrate up`; the roles must exist. BYPASSRLS needs a superuser
// unless systemRole already has it.
func Setup(ctx context.Context, owner *pgx.Conn, appRole, systemRole string) error {
	app, err := schema.GrantStatements(appRole, false)
	if err != nil {
		return err
	}
	sys, err := schema.GrantStatements(systemRole, true)
	if err != nil {
		return err
	}
	stmts := append([]string{schemaSQL, "GRANT SELECT, INSERT, UPDATE, DELETE ON tenancy_orders TO " + appRole}, app...)
	stmts = append(stmts, sys...)
	return pgx.BeginFunc(ctx, owner, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("tenancy: setup: %w", err)
			}
		}
		return schema.EnableTenancy(ctx, tx)
	})
}
