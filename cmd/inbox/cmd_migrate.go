package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pginbox/pginbox/schema"
)

var migrateCmd = &command{
	Name:    "migrate",
	Args:    "up|down|status [--to VERSION] [--yes] [--citus [--colocate-with TABLE]]",
	Summary: "apply, roll back or show pginbox's schema migrations",
	Help: `
up applies every pending migration (or up to --to). down rolls back the latest
migration (or down to --to). status lists the migrations and which are applied.

Workers and accepts may keep running: a migration that cannot take its table
locks within a moment gives way to them, changing nothing, and runs again,
for up to five minutes (docs/UPGRADING.md says what waits, and for how long).

Rolling back to version 0 drops every pginbox table with all its receipts and
audit rows; down refuses it without --yes and says what it would drop.

pginbox keeps its own goose version table (` + schema.VersionTable + `) and
advisory lock, so it never touches your application's goose history. CI can run
the same files with the goose CLI:

  goose -dir <module dir>/schema -table ` + schema.VersionTable + ` postgres "$DATABASE_URL" up

On a Citus cluster, connect to the coordinator and add --citus: the Citus
migration line shares versions 1 to 6 and 8 on, and has its own version 7,
which distributes every pginbox table by scope ID, colocated with each other
(docs/SCALE-OUT.md). --colocate-with TABLE puts them in the colocation group of
an application table already distributed by a text tenant column. The two
lines refuse each other's databases; a single server never needs --citus.`,
}

func init() {
	migrateCmd.Run = runMigrate
	register(migrateCmd)
}

type jsonMigration struct {
	Version int64  `json:"version"`
	File    string `json:"file"`
	Applied bool   `json:"applied"`
}

type jsonMigrateResult struct {
	Action     string          `json:"action"`
	Changed    []int64         `json:"changed"`
	Current    int64           `json:"current"`
	Expected   int64           `json:"expected"`
	Migrations []jsonMigration `json:"migrations,omitempty"`
}

func runMigrate(ctx context.Context, e *env, args []string) error {
	fs := newFlags(migrateCmd)
	var d dbFlags
	d.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	to := numberVar(fs, "to", 0, 0, schema.Version, fmt.Sprintf("target `VERSION` for up (1 to %d) or down (0 to %d)", schema.Version, schema.Version))
	to.noun = "a migration version"
	yes := fs.Bool("yes", false, "confirm a rollback to version 0, which drops every pginbox table and its data")
	citus := fs.Bool("citus", false, "use the Citus migration line (connect to the Citus coordinator)")
	colocate := fs.String("colocate-with", "", "with --citus and up: colocate pginbox's tables with `TABLE`, distributed by a text tenant column")
	pos, err := parseFlags(e, migrateCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one action: up, down or status")
	}
	action := pos[0]
	if action != "up" && action != "down" && action != "status" {
		return usagef("unknown action %q: want up, down or status", action)
	}
	if *colocate != "" && (!*citus || action != "up") {
		return usagef("--colocate-with applies to up --citus only")
	}
	target := int64(-1)
	if to.set {
		switch {
		case action == "status":
			return usagef("--to applies to up and down only")
		case action == "up" && to.n == 0:
			return usagef("--to 0 applies to down only: up takes 1 to %d", schema.Version)
		}
		target = to.n
	}
	dsn, err := d.dsn(e)
	if err != nil {
		return err
	}
	// Fail on a bad DSN or an unreachable server with the same message as the
	// other commands, before goose does.
	pool, err := openPool(ctx, dsn, 1, false)
	if err != nil {
		return err
	}
	pool.Close()

	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("opening the database: %w", err)
	}
	// A migration reports what it changed beyond the schema (rows it
	// quarantined or removed) in NOTICEs of its own.
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.HasPrefix(n.Message, "pginbox") {
			fmt.Fprintf(e.stderr, "%s: %s\n", strings.ToLower(n.Severity), n.Message)
		}
	}
	if *colocate != "" {
		cfg.RuntimeParams[schema.CitusColocateSetting] = *colocate
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	newMigrator := schema.NewMigrator
	if *citus {
		newMigrator = schema.NewCitusMigrator
	}
	m, err := newMigrator(db)
	if err != nil {
		return err
	}
	// Workers may hold the tables: say why a migration takes longer.
	m.OnLockRetry(func(r schema.LockRetry) {
		fmt.Fprintf(e.stderr, "migration %d gave way to transactions holding pginbox's tables (%d so far, docs/UPGRADING.md): trying again, waiting up to %v for the locks\n",
			r.Version, r.Attempts, r.Wait)
	})
	if *colocate != "" {
		if err := schema.CheckColocateWith(ctx, db, *colocate); err != nil {
			return err
		}
	}

	res := jsonMigrateResult{Action: action, Changed: []int64{}, Expected: schema.Version}
	switch action {
	case "up":
		var done []int64
		if target >= 0 {
			done, err = m.UpTo(ctx, target)
		} else {
			done, err = m.Up(ctx)
		}
		res.Changed = append(res.Changed, done...)
	case "down":
		cur, cerr := m.Current(ctx)
		if cerr != nil {
			return cerr
		}
		if target < 0 {
			if cur == 0 {
				return errors.New("nothing to roll back: no pginbox migration is applied")
			}
			target = previousVersion(ctx, m, cur)
		}
		if target == 0 && cur > 0 && !*yes {
			return refuseDrop(ctx, db, cur)
		}
		var done []int64
		done, err = m.DownTo(ctx, target)
		res.Changed = append(res.Changed, done...)
	}
	if err != nil {
		verb := map[string]string{"up": "applied", "down": "rolled back"}[action]
		for _, v := range res.Changed { // what ran before the failure stays done
			fmt.Fprintf(e.stderr, "%s version %d before the failure\n", verb, v)
		}
		return err
	}
	if res.Current, err = m.Current(ctx); err != nil {
		return err
	}
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	files := map[int64]string{}
	for _, s := range st {
		files[s.Version] = path.Base(s.Source)
		res.Migrations = append(res.Migrations, jsonMigration{Version: s.Version, File: path.Base(s.Source), Applied: s.Applied})
	}

	if *asJSON {
		return writeJSON(e.stdout, res)
	}
	switch action {
	case "up", "down":
		verb := map[string]string{"up": "applied", "down": "rolled back"}[action]
		if len(res.Changed) == 0 {
			fmt.Fprintf(e.stdout, "nothing to do\n")
		}
		for _, v := range res.Changed {
			fmt.Fprintf(e.stdout, "%s %s\n", verb, files[v])
		}
	case "status":
		tw := newTable(e.stdout)
		fmt.Fprintln(tw, "VERSION\tSTATE\tFILE")
		for _, s := range res.Migrations {
			state := "pending"
			if s.Applied {
				state = "applied"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\n", s.Version, state, s.File)
		}
		tw.Flush()
	}
	switch {
	case res.Current == schema.Version:
		fmt.Fprintf(e.stdout, "schema at version %d: up to date\n", res.Current)
	case res.Current < schema.Version:
		fmt.Fprintf(e.stdout, "schema at version %d; this build needs %d: run `inbox migrate up`\n", res.Current, schema.Version)
	default:
		fmt.Fprintf(e.stdout, "schema at version %d, newer than this build (%d): upgrade pginbox\n", res.Current, schema.Version)
	}
	return nil
}

// previousVersion is the applied version just below cur (0 if none).
func previousVersion(ctx context.Context, m *schema.Migrator, cur int64) int64 {
	st, err := m.Status(ctx)
	if err != nil {
		return cur - 1
	}
	prev := int64(0)
	for _, s := range st {
		if s.Applied && s.Version < cur && s.Version > prev {
			prev = s.Version
		}
	}
	return prev
}

// schemaTables are the tables pginbox's migrations create; rolling back to
// version 0 drops them.
var schemaTables = []string{"pginbox_receipts", "pginbox_work", "pginbox_audit", "pginbox_outbox"}

// maxCounted bounds the row counts of refuseDrop, so a refusal stays cheap on
// a large history.
const maxCounted = 1_000_000

// refuseDrop says what a rollback from version cur to 0 would drop.
func refuseDrop(ctx context.Context, db *sql.DB, cur int64) error {
	var drops []string
	for _, t := range schemaTables {
		var exists bool
		if err := db.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", t).Scan(&exists); err != nil {
			return fmt.Errorf("looking up table %s: %w", t, err)
		}
		if !exists {
			continue
		}
		var n int64
		q := fmt.Sprintf("SELECT count(*) FROM (SELECT FROM %s LIMIT %d) s", t, maxCounted+1)
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			return fmt.Errorf("counting the rows of %s: %w", t, err)
		}
		rows := count(n, "row", "rows")
		if n > maxCounted {
			rows = fmt.Sprintf("more than %d rows", maxCounted)
		}
		drops = append(drops, fmt.Sprintf("%s (%s)", t, rows))
	}
	what := strings.Join(drops, ", ")
	if i := strings.LastIndex(what, ", "); i >= 0 {
		what = what[:i] + " and " + what[i+2:]
	}
	if what == "" {
		what = "every pginbox table"
	}
	return usagef("refusing to roll back from version %d to 0 without --yes: it drops %s, and nothing of it can be recovered; nothing changed",
		cur, what)
}
