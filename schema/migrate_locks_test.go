package schema_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/schema"
)

// holds runs query (a boolean) on pool: the tests below wait for a session
// to be blocked on a lock, a state of the server.
func holds(t *testing.T, pool *pgxpool.Pool, query string, args ...any) func() bool {
	return func() bool {
		var ok bool
		if err := pool.QueryRow(t.Context(), query, args...).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
}

// withDeadlockTimeout opens dsn with the session's deadlock_timeout set: the
// session with the shorter one runs the deadlock check first and is the one
// PostgreSQL aborts.
func withDeadlockTimeout(t *testing.T, dsn, timeout string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["deadlock_timeout"] = timeout
	return cfg
}

func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// Issue 47: `inbox migrate up` deadlocked with a claiming worker. A claim
// whose statement the server parses (the first on a connection, and the
// first on every connection after a migration committed, which invalidates
// the cached plans) locks pginbox_work before pginbox_receipts; a claim on a
// cached plan, a handler's ReceiptStart and every accept lock pginbox_receipts
// first. So no order of the migration's table locks is safe by itself:
// versions 7 and 9 waited for pginbox_receipts behind a transaction, a
// parsed claim took pginbox_work and queued behind them for
// pginbox_receipts, and once they had pginbox_receipts they waited for
// pginbox_work: a cycle, which PostgreSQL breaks by aborting whichever side
// checks first (the migration, or the worker's claim).
//
// Now a migration waits only for its first lock, holding nothing, and takes
// the others without waiting: it gives way (and the migrator tries again)
// instead of closing a cycle, so neither side fails.
func TestMigrationGivesWayToAClaim(t *testing.T) {
	t.Parallel()
	for _, version := range []int64{7, 9} {
		for _, victim := range []string{"migration", "claim"} {
			t.Run(fmt.Sprintf("v%d/%s_checks_first", version, victim), func(t *testing.T) {
				t.Parallel()
				givesWay(t, version, victim)
			})
		}
	}
}

func givesWay(t *testing.T, version int64, victim string) {
	is := is.New(t)
	ctx := t.Context()
	dsn := inboxtest.EmptyDatabase(t)
	_, pool := open(t, dsn)
	short, long := "100ms", "10min"
	migTimeout, claimTimeout := short, long
	if victim == "claim" {
		migTimeout, claimTimeout = long, short
	}
	db := stdlib.OpenDB(*withDeadlockTimeout(t, dsn, migTimeout))
	t.Cleanup(func() { db.Close() })
	m := migrator(t, db)
	_, err := m.UpTo(ctx, version-1)
	is.NoErr(err)
	var gaveWay []schema.LockRetry
	m.OnLockRetry(func(r schema.LockRetry) { gaveWay = append(gaveWay, r) })

	// Two due messages, accepted by the v6 release.
	for i := range 2 {
		_, err := pool.Exec(ctx, v6Accept, false, inboxtype.New(), "global", "", "s", upgradeConsumer,
			fmt.Sprint(i), "e", 1, make([]byte, 32), "{}", "{}", 10)
		is.NoErr(err)
	}

	// A worker's claim transaction that has not committed yet holds
	// pginbox_receipts (and the first message).
	held, err := pool.Begin(ctx)
	is.NoErr(err)
	defer func() { _ = held.Rollback(context.Background()) }()
	claimed := 0
	rows, err := held.Query(ctx, v6Claim, []string{upgradeConsumer}, 1, inboxtype.New(), 30_000)
	is.NoErr(err)
	for rows.Next() {
		claimed++
	}
	is.NoErr(rows.Err())
	is.Equal(claimed, 1)

	// The migration waits for pginbox_receipts behind it.
	type result struct {
		applied []int64
		err     error
	}
	migrated := make(chan result, 1)
	go func() {
		applied, err := m.UpTo(ctx, version)
		migrated <- result{applied, err}
	}()
	testkit.Eventually(t, time.Minute, holds(t, pool,
		`SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = 'pginbox_receipts'::regclass
			AND mode = 'AccessExclusiveLock' AND NOT granted)`), "the migration to wait for pginbox_receipts")

	// Another worker's claim, on a new connection: the server parses it.
	conn, err := pgx.ConnectConfig(ctx, withDeadlockTimeout(t, dsn, claimTimeout))
	is.NoErr(err)
	defer conn.Close(context.Background())
	claims := make(chan result, 1)
	go func() {
		n := 0
		err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit = off"}, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, v6Claim, []string{upgradeConsumer}, 1, inboxtype.New(), 30_000)
			if err != nil {
				return err
			}
			for rows.Next() {
				n++
			}
			return rows.Err()
		})
		claims <- result{[]int64{int64(n)}, err}
	}()
	pid := conn.PgConn().PID()
	testkit.Eventually(t, time.Minute, holds(t, pool,
		`SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND relation = 'pginbox_receipts'::regclass AND NOT granted)
		    AND EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND relation = 'pginbox_work'::regclass AND granted)`, pid),
		"the claim to hold pginbox_work and wait for pginbox_receipts")

	// The first claim commits: the migration goes on.
	is.NoErr(held.Commit(ctx))

	mig, claim := <-migrated, <-claims
	if isDeadlock(mig.err) || isDeadlock(claim.err) {
		t.Fatalf("deadlock: migration: %v; claim: %v", mig.err, claim.err)
	}
	is.NoErr(mig.err)
	is.NoErr(claim.err)
	is.Equal(mig.applied, []int64{version})
	// It gave way: pginbox_work was busy (SQLSTATE 55P03), not deadlocked.
	is.True(len(gaveWay) > 0)
	for _, r := range gaveWay {
		var pgErr *pgconn.PgError
		is.True(errors.As(r.Err, &pgErr))
		is.Equal(pgErr.Code, "55P03")
		is.Equal(r.Version, version)
	}
	t.Logf("the migration gave way %d time(s): %v", len(gaveWay), gaveWay[0].Err)
	is.Equal(claim.applied, []int64{1}) // the second message
	var current int64
	current, err = m.Current(ctx)
	is.NoErr(err)
	is.Equal(current, version)
}

// openMigrator opens a *sql.DB on dsn for a Migrator.
func openMigrator(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var (
	// The relations of pginbox's that workers and accepts use.
	pginboxRelation = regexp.MustCompile(`\bpginbox_(?:receipts_live|receipts|work|audit|outbox)\b`)
	createdRelation = regexp.MustCompile(`(?i)^CREATE\s+(?:TABLE|VIEW)\s+(pginbox_\w+)`)
	quoted          = regexp.MustCompile(`'[^']*'`)
	lockStatement   = regexp.MustCompile(`(?is)^LOCK\s+TABLE\s+(.+?)\s+IN\s+[A-Z ]+?\s+MODE(\s+NOWAIT)?;$`)
)

// sections splits a goose migration file into its Up and Down statements,
// without comments: a StatementBegin block is one statement, other
// statements end with a line ending in a semicolon.
func sections(text string) map[string][]string {
	out := map[string][]string{}
	section, block := "", false
	var cur []string
	flush := func() {
		if s := strings.TrimSpace(strings.Join(cur, "\n")); s != "" && section != "" {
			out[section] = append(out[section], s)
		}
		cur = nil
	}
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "-- +goose Up" || trimmed == "-- +goose Down":
			flush()
			section = strings.TrimPrefix(trimmed, "-- +goose ")
		case trimmed == "-- +goose StatementBegin":
			flush()
			block = true
		case trimmed == "-- +goose StatementEnd":
			flush()
			block = false
		case strings.HasPrefix(trimmed, "--") || trimmed == "":
		default:
			cur = append(cur, line)
			if !block && strings.HasSuffix(trimmed, ";") {
				flush()
			}
		}
	}
	flush()
	return out
}

// Every migration step that changes more than one of the relations workers
// use starts (after its SET LOCAL settings) by locking them all: the first
// statement waits for one relation alone, pginbox_receipts when the step
// changes it, and the second takes the others with NOWAIT. A step that waits
// for a second lock while holding the first can close a cycle with a
// worker's statement, whichever order it picks (TestMigrationGivesWayToAClaim).
// Function bodies run later, not in the step, and quoted names are data.
func TestMigrationsLockTheirTablesFirst(t *testing.T) {
	t.Parallel()
	for _, line := range []struct {
		name string
		fsys fs.FS
	}{{"single-node", schema.FS()}, {"citus", schema.CitusFS()}} {
		files, err := fs.Glob(line.fsys, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files { // the Citus line's twins among them
			text, err := fs.ReadFile(line.fsys, file)
			if err != nil {
				t.Fatal(err)
			}
			for section, stmts := range sections(string(text)) {
				touched, created := map[string]bool{}, map[string]bool{}
				for _, s := range stmts {
					upper := strings.ToUpper(s)
					if strings.HasPrefix(upper, "CREATE FUNCTION") || strings.HasPrefix(upper, "CREATE OR REPLACE FUNCTION") {
						continue
					}
					if m := createdRelation.FindStringSubmatch(s); m != nil {
						created[m[1]] = true
					}
					for _, r := range pginboxRelation.FindAllString(quoted.ReplaceAllString(s, "''"), -1) {
						touched[r] = true
					}
				}
				for r := range created {
					delete(touched, r)
				}
				if len(touched) < 2 {
					continue
				}
				where := fmt.Sprintf("%s %s (%s)", line.name, file, section)
				for len(stmts) > 0 && strings.HasPrefix(strings.ToUpper(stmts[0]), "SET LOCAL") {
					stmts = stmts[1:]
				}
				var first, rest []string
				if len(stmts) >= 2 {
					if m := lockStatement.FindStringSubmatch(stmts[0]); m != nil && m[2] == "" {
						first = strings.Split(m[1], ",")
					}
					if m := lockStatement.FindStringSubmatch(stmts[1]); m != nil && m[2] != "" {
						rest = strings.Split(m[1], ",")
					}
				}
				if len(first) != 1 || rest == nil {
					t.Errorf("%s changes %s but does not start with LOCK TABLE <one of them> IN ... MODE; LOCK TABLE <the others> IN ... MODE NOWAIT;",
						where, strings.Join(slices.Sorted(maps.Keys(touched)), ", "))
					continue
				}
				if touched["pginbox_receipts"] && strings.TrimSpace(first[0]) != "pginbox_receipts" {
					t.Errorf("%s waits for %s first: wait for pginbox_receipts, the table the handlers' transactions hold", where, first[0])
				}
				for _, r := range append(first, rest...) {
					delete(touched, strings.TrimSpace(r))
				}
				if len(touched) > 0 {
					t.Errorf("%s changes %s without locking it first", where, strings.Join(slices.Sorted(maps.Keys(touched)), ", "))
				}
			}
		}
	}
}

// A table that stays busy through every attempt: the migrator gives up with
// ErrTablesBusy, changing nothing more, and keeps what it applied before.
func TestMigrationGivesUpOnATableThatStaysBusy(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := t.Context()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.UpTo(ctx, 7)
	is.NoErr(err)
	holder, err := pool.Begin(ctx)
	is.NoErr(err)
	defer func() { _ = holder.Rollback(context.Background()) }()
	_, err = holder.Exec(ctx, "LOCK TABLE pginbox_audit IN ROW EXCLUSIVE MODE") // an admin action, say
	is.NoErr(err)

	m.SetLockRetryBudget(time.Second)
	gaveWay := 0
	m.OnLockRetry(func(schema.LockRetry) { gaveWay++ })
	applied, err := m.UpTo(ctx, 9)
	t.Log(err)
	is.True(errors.Is(err, schema.ErrTablesBusy))
	is.True(strings.Contains(err.Error(), "migration 9 gave way"))
	is.True(strings.Contains(err.Error(), "run `inbox migrate up` again"))
	is.Equal(applied, []int64{8}) // v8 changes pginbox_work alone
	is.True(gaveWay > 1)
	current, err := m.Current(ctx)
	is.NoErr(err)
	is.Equal(current, int64(8))

	is.NoErr(holder.Rollback(ctx))
	applied, err = m.UpTo(ctx, 9)
	is.NoErr(err)
	is.Equal(applied, []int64{9})
}
