package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/schema"
)

var demoCmd = &command{
	Name:    "demo",
	Args:    "[--database-url DSN [--migrate]]",
	Summary: "run an orders scenario end to end (starts a throwaway PostgreSQL)",
	Help: `
The demo accepts a stream of order events (with redeliveries and one changed
redelivery), processes them with a worker whose handler fails transiently a few
times and permanently once, shows the stats and the DEAD receipt, requeues it
after a "fix" and shows it COMPLETED. It takes a few seconds.

Without a database it starts a throwaway PostgreSQL (the server binaries must be
installed: initdb and postgres), and removes it at the end, also on Ctrl-C.
With --database-url or $DATABASE_URL it uses that database: it migrates only
with --migrate, creates the table pginbox_demo_orders if missing, and leaves it
and the demo's receipts (under their own tenant and consumer) behind.`,
}

func init() {
	demoCmd.Run = runDemo
	register(demoCmd)
}

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := newFlags(demoCmd)
	var d dbFlags
	d.add(fs)
	migrate := fs.Bool("migrate", false, "apply pginbox's migrations to the given database first")
	pos, err := parseFlags(e, demoCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	start := time.Now()
	out := newLiveLine(e)

	dsn := d.url
	if dsn == "" {
		dsn = e.getenv(envDatabaseURL)
	}
	sc := demoScenario{
		out: out, e: e,
		tenant:   "acme",
		consumer: "orders.projection.v1",
	}
	if dsn == "" {
		if *migrate {
			return usagef("--migrate needs --database-url or $%s; without them the demo migrates its own throwaway server", envDatabaseURL)
		}
		out.printf("No %s set: starting a throwaway PostgreSQL...\n", envDatabaseURL)
		t0 := time.Now()
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{}) // fsync off: the data is thrown away
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("starting a throwaway PostgreSQL: %w; or point the demo at a server with --database-url", err)
		}
		defer func() {
			if err := cluster.Stop(); err != nil {
				fmt.Fprintf(e.stderr, "inbox demo: stopping PostgreSQL: %v\n", err)
				return
			}
			out.printf("Stopped PostgreSQL and removed %s\n", cluster.Dir())
		}()
		out.printf("PostgreSQL ready in %s at %s\n", fmtAge(time.Since(t0)), cluster.Dir())
		dsn = cluster.ConnString("postgres")
		*migrate = true
		sc.createTable = "CREATE TABLE"
	} else {
		// Reruns on a real database must not collide with earlier runs' identities,
		// nor hand receipts to an application's own worker.
		suffix := make([]byte, 3)
		rand.Read(suffix)
		sc.tenant = "demo-" + hex.EncodeToString(suffix)
		sc.consumer = "pginbox-demo.orders.projection.v1"
		sc.createTable = "CREATE TABLE IF NOT EXISTS"
		sc.external = true
	}
	if *migrate {
		if err := schema.UpDSN(ctx, dsn); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		out.printf("Schema migrated to version %d (goose table %s)\n", schema.Version, schema.VersionTable)
	}
	pool, err := openPool(ctx, dsn, 10, true)
	if errors.Is(err, schema.ErrNotMigrated) {
		return fmt.Errorf("%w, or let the demo do it: `inbox demo --migrate`", err)
	}
	if err != nil {
		return err
	}
	defer pool.Close()
	sc.pool = pool

	err = sc.run(ctx)
	out.done() // an interrupted run may leave its live line open
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	out.printf("demo finished in %s\n", fmtAge(time.Since(start)))
	return nil
}
