package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/schema"
)

var tenancyStatusCmd = &command{
	Name:    "tenancy status",
	Args:    "[--json]",
	Summary: "whether row-level security is on, table by table, and whether this role bypasses it",
	Help: `
Lists pginbox's tables with row-level security enabled and forced (forced: the
tables' owner is held to the policies too), and says whether the role of
--database-url bypasses row-level security (a superuser or BYPASSRLS role sees
every scope). Any role with pginbox's grants may run it.

With --json:
  {
    "enabled": true,          every table enabled and forced
    "tables": [{"table": "pginbox_receipts", "enabled": true, "forced": true}, ...],
    "role": {"name": "shop_app", "superuser": false, "bypassrls": false,
             "owner": false, "bypasses": false}
  }`,
}

func init() {
	tenancyStatusCmd.Run = runTenancyStatus
	tenancyGroup.add(tenancyStatusCmd)
}

type jsonTableTenancy struct {
	Table   string `json:"table"`
	Enabled bool   `json:"enabled"`
	Forced  bool   `json:"forced"`
}

type jsonRole struct {
	Name      string `json:"name"`
	Superuser bool   `json:"superuser"`
	BypassRLS bool   `json:"bypassrls"`
	Owner     bool   `json:"owner"`    // owns (or is a member of the owner of) pginbox's tables
	Bypasses  bool   `json:"bypasses"` // row-level security does not apply to it now
}

type jsonTenancyStatus struct {
	Enabled bool               `json:"enabled"`
	Tables  []jsonTableTenancy `json:"tables"`
	Role    jsonRole           `json:"role"`
}

// roleInfo describes role as row-level security sees it. ok is false when no
// such role exists.
func roleInfo(ctx context.Context, q schema.Querier, role string) (r jsonRole, ok bool, err error) {
	err = q.QueryRow(ctx, `
SELECT r.rolname, r.rolsuper, r.rolbypassrls,
       pg_has_role(r.oid, c.relowner, 'MEMBER')
FROM pg_roles r, pg_class c
WHERE r.rolname = $1 AND c.oid = to_regclass('pginbox_receipts')`, role).
		Scan(&r.Name, &r.Superuser, &r.BypassRLS, &r.Owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("reading role %s: %w", role, err)
	}
	return r, true, nil
}

func runTenancyStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlags(tenancyStatusCmd)
	var d dbFlags
	d.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(e, tenancyStatusCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("status takes no arguments")
	}
	pool, err := d.connect(ctx, e, true)
	if err != nil {
		return err
	}
	defer pool.Close()
	tables, err := schema.TenancyStatus(ctx, pool)
	if err != nil {
		return err
	}
	var user string
	if err := pool.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil {
		return fmt.Errorf("reading the current role: %w", err)
	}
	role, _, err := roleInfo(ctx, pool, user)
	if err != nil {
		return err
	}
	res := jsonTenancyStatus{Enabled: true, Role: role}
	enabled, forced := 0, 0
	for _, t := range tables {
		res.Tables = append(res.Tables, jsonTableTenancy{Table: t.Table, Enabled: t.Enabled, Forced: t.Forced})
		if t.Enabled {
			enabled++
		}
		if t.Forced {
			forced++
		}
	}
	res.Enabled = enabled == len(tables) && forced == len(tables)
	// The owner is exempt from a policy the table does not force.
	res.Role.Bypasses = role.Superuser || role.BypassRLS || (role.Owner && forced < len(tables))
	if *asJSON {
		return writeJSON(e.stdout, res)
	}

	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "TABLE\tROW SECURITY\tFORCED")
	onOff := map[bool]string{true: "enabled", false: "disabled"}
	yesNo := map[bool]string{true: "yes", false: "no"}
	for _, t := range res.Tables {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Table, onOff[t.Enabled], yesNo[t.Forced])
	}
	tw.Flush()
	switch {
	case res.Enabled:
		fmt.Fprintln(e.stdout, "tenancy: enabled: a role without BYPASSRLS sees only the scope its transaction sets")
	case enabled == 0:
		fmt.Fprintln(e.stdout, "tenancy: disabled: every role with pginbox's grants sees every scope; `inbox tenancy enable` turns it on")
	default:
		fmt.Fprintln(e.stdout, "tenancy: partly enabled: run `inbox tenancy enable` to enable and force it on every table")
	}
	switch {
	case role.Superuser:
		fmt.Fprintf(e.stdout, "role %s: superuser: bypasses row-level security, sees every scope\n", role.Name)
	case role.BypassRLS:
		fmt.Fprintf(e.stdout, "role %s: BYPASSRLS: bypasses row-level security, sees every scope (a system role)\n", role.Name)
	case res.Role.Bypasses:
		fmt.Fprintf(e.stdout, "role %s: owns the tables, which do not force row-level security: sees every scope\n", role.Name)
	case role.Owner:
		fmt.Fprintf(e.stdout, "role %s: owns the tables: held to row-level security while it is forced, but may turn it off\n", role.Name)
	default:
		fmt.Fprintf(e.stdout, "role %s: held to row-level security where it is enabled\n", role.Name)
	}
	return nil
}
