package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/schema"
)

var tenancyGrantCmd = &command{
	Name:    "tenancy grant",
	Args:    "ROLE [--system] [--print]",
	Summary: "give a role the privileges it needs on pginbox's tables (--print: only print the SQL)",
	Help: `
An application role (the default) gets table privileges only: under row-level
security it acts inside the scope its transactions set. It must not be a
superuser or own pginbox's tables; grant refuses such a role, and removes
BYPASSRLS from it if it has it.

A system role (--system) is for the parts that work across tenants: the
worker's claims, heartbeats and recovery (WorkerConfig.SystemPool), purge
across tenants, the outbox relay and operator views without --tenant. It also
gets BYPASSRLS, which only a superuser can grant: run this as a superuser, or
run it with --print and hand the SQL to one.

The role must exist (CREATE ROLE shop_app LOGIN PASSWORD '...'). Run grant as
the role that owns pginbox's tables (the one that ran ` + "`inbox migrate up`" + `) or
a superuser. All statements run in one transaction: on an error nothing
changed.`,
}

func init() {
	tenancyGrantCmd.Run = runTenancyGrant
	tenancyGroup.add(tenancyGrantCmd)
}

// sqlScript renders statements for a person to run in psql.
func sqlScript(stmts []string) string {
	return "  " + strings.Join(stmts, ";\n  ") + ";"
}

func runTenancyGrant(ctx context.Context, e *env, args []string) error {
	fs := newFlags(tenancyGrantCmd)
	var d dbFlags
	d.add(fs)
	system := fs.Bool("system", false, "a system role: also BYPASSRLS, to work across tenants (needs a superuser)")
	printOnly := fs.Bool("print", false, "print the SQL instead of running it; needs no database")
	pos, err := parseFlags(e, tenancyGrantCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one ROLE")
	}
	role := pos[0]
	stmts, err := schema.GrantStatements(role, *system)
	if errors.Is(err, schema.ErrBadRoleName) {
		return usagef("role %q: want a lower-case SQL identifier (letters, digits, _ and $, not starting with a digit)", role)
	}
	if err != nil {
		return err
	}
	if *printOnly {
		fmt.Fprintln(e.stdout, strings.Join(stmts, ";\n")+";")
		return nil
	}
	pool, err := d.connect(ctx, e, true)
	if err != nil {
		return err
	}
	defer pool.Close()

	target, ok, err := roleInfo(ctx, pool, role)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("role %s does not exist: create it first (as a superuser or a role with CREATEROLE), e.g. CREATE ROLE %s LOGIN PASSWORD '...', then run this again", role, role)
	}
	if !*system {
		switch {
		case target.Superuser:
			return fmt.Errorf("role %s is a superuser, and row-level security never applies to a superuser: give the application a role without SUPERUSER, or grant this one with --system", role)
		case target.Owner:
			return fmt.Errorf("role %s owns pginbox's tables, so it can turn row-level security off: give the application a role of its own and keep this one for migrations", role)
		}
	}
	var me string
	var canGrant bool
	err = pool.QueryRow(ctx, `
SELECT current_user, pg_has_role(current_user, c.relowner, 'MEMBER')
FROM pg_class c WHERE c.oid = to_regclass('pginbox_receipts')`).Scan(&me, &canGrant)
	if err != nil {
		return fmt.Errorf("reading the current role: %w", err)
	}
	if !canGrant {
		return fmt.Errorf("role %s does not own pginbox's tables, so it cannot grant privileges on them; nothing changed: connect as the role that ran `inbox migrate up` (--database-url), or have it run:\n%s", me, sqlScript(stmts))
	}

	// The role attribute is left alone when it is already right: changing it
	// needs a superuser even when nothing would change.
	run := stmts
	if target.BypassRLS == *system {
		run = stmts[:len(stmts)-1]
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, s := range run {
			if _, err := tx.Exec(ctx, s); err != nil {
				return grantError(role, *system, s, stmts, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, s := range run {
		fmt.Fprintf(e.stdout, "%s;\n", s)
	}
	if *system {
		fmt.Fprintf(e.stdout, "role %s may now work across tenants (BYPASSRLS): use it for the worker's SystemPool, purge, the outbox relay and operator views only\n", role)
	} else {
		fmt.Fprintf(e.stdout, "role %s may now use pginbox inside the scope its transactions set\n", role)
	}
	return nil
}

// grantError explains a failed statement; the rest of the transaction was
// rolled back.
func grantError(role string, system bool, stmt string, all []string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" && strings.HasPrefix(stmt, "ALTER ROLE") {
		what := "granting BYPASSRLS to"
		if !system {
			what = "removing BYPASSRLS from"
		}
		return fmt.Errorf("%s role %s needs a superuser: %w; nothing changed: ask a superuser to run:\n%s", what, role, err, sqlScript(all))
	}
	return fmt.Errorf("running %q: %w; nothing changed", stmt, err)
}
