package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/pginbox/pginbox/schema"
)

var tenancyEnableCmd = &command{
	Name:    "tenancy enable",
	Args:    "[--database-url DSN]",
	Summary: "enable and force row-level security on pginbox's tables",
	Help: `
From then on every role without BYPASSRLS, the tables' owner included, sees
and writes only the rows of the scope its transaction sets. Run it as the role
that owns pginbox's tables (the one that ran ` + "`inbox migrate up`" + `), after
` + "`inbox tenancy grant`" + ` gave the application and system roles their grants:
the worker's claims and recovery, purge across tenants, the outbox relay and
the operator views (no --tenant) need a role with BYPASSRLS. Running it again
changes nothing.`,
}

var tenancyDisableCmd = &command{
	Name:    "tenancy disable",
	Args:    "--yes",
	Summary: "turn row-level security off again (every role sees every scope)",
	Help: `
Every role with pginbox's grants sees and changes every tenant's rows again;
the policies stay defined, so ` + "`inbox tenancy enable`" + ` turns them back on. It
refuses without --yes. Run it as the role that owns pginbox's tables.`,
}

func init() {
	tenancyEnableCmd.Run = runTenancyEnable
	tenancyDisableCmd.Run = runTenancyDisable
	tenancyGroup.add(tenancyEnableCmd)
	tenancyGroup.add(tenancyDisableCmd)
}

func runTenancyEnable(ctx context.Context, e *env, args []string) error {
	fs := newFlags(tenancyEnableCmd)
	var d dbFlags
	d.add(fs)
	pos, err := parseFlags(e, tenancyEnableCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("enable takes no arguments")
	}
	pool, err := d.connect(ctx, e, true)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := schema.EnableTenancy(ctx, pool); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "row-level security enabled and forced on %s\n", strings.Join(schema.TenancyTables, ", "))
	fmt.Fprintln(e.stdout, "a role without BYPASSRLS now sees only the scope its transaction sets; `inbox tenancy status` shows whether yours bypasses it")
	return nil
}

func runTenancyDisable(ctx context.Context, e *env, args []string) error {
	fs := newFlags(tenancyDisableCmd)
	var d dbFlags
	d.add(fs)
	yes := fs.Bool("yes", false, "confirm: every role with pginbox's grants sees every tenant's rows again")
	pos, err := parseFlags(e, tenancyDisableCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("disable takes no arguments")
	}
	if !*yes {
		return usagef("refusing to disable row-level security without --yes: it opens every tenant's rows to every role with pginbox's grants; nothing changed")
	}
	pool, err := d.connect(ctx, e, true)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := schema.DisableTenancy(ctx, pool); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "row-level security disabled on %s: every role with pginbox's grants sees every scope\n", strings.Join(schema.TenancyTables, ", "))
	fmt.Fprintln(e.stdout, "the policies stay defined: `inbox tenancy enable` turns them back on")
	return nil
}
