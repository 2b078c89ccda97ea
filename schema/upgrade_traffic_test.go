package schema_test

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/schema"
)

// upgradeRuns is how many upgrades TestUpgradeFromV6UnderWorkers runs:
// PGINBOX_UPGRADE_RUNS, or 2.
func upgradeRuns(t *testing.T) int {
	s := os.Getenv("PGINBOX_UPGRADE_RUNS")
	if s == "" {
		return 2
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("PGINBOX_UPGRADE_RUNS=%q: want a positive number", s)
	}
	return n
}

// The documented upgrade path, under traffic: `inbox migrate up` from v6 to
// today's version while the v6 release accepts messages and its workers
// claim, heartbeat, recover and handle them; then today's Worker and Client
// join the old ones (a rolling deploy), a later release's migration is
// applied and rolled back twice under all of them, and they drain the queue. No migration and no
// worker statement may fail (a deadlock least of all), and every accepted
// message is handled exactly once. Issue 47's target: 0 deadlocks in 20
// runs (PGINBOX_UPGRADE_RUNS=20).
func TestUpgradeFromV6UnderWorkers(t *testing.T) {
	runs := upgradeRuns(t)
	var deadlocks, retries atomic.Int64
	for i := range runs {
		t.Run(fmt.Sprintf("run%02d", i+1), func(t *testing.T) {
			d, r := upgradeUnderWorkers(t)
			deadlocks.Add(d)
			retries.Add(r)
		})
	}
	t.Logf("%d upgrades from v6 under workers: %d deadlocks, %d times a migration gave way and was retried",
		runs, deadlocks.Load(), retries.Load())
}

// errorLog keeps the Error records of today's Worker.
type errorLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *errorLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelError }
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler               { return l }
func (l *errorLog) WithGroup(string) slog.Handler                    { return l }
func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, msg)
	return nil
}

func (l *errorLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

func upgradeUnderWorkers(t *testing.T) (deadlocks, retries int64) {
	is := is.New(t)
	ctx := t.Context()
	dsn := inboxtest.EmptyDatabase(t)
	db := openMigrator(t, dsn)
	m := migrator(t, db)
	_, err := m.UpTo(ctx, 6)
	is.NoErr(err)
	countRetries := func(r schema.LockRetry) {
		retries++
		t.Logf("migration %d gave way (%d): %v", r.Version, r.Attempts, r.Err)
	}
	m.OnLockRetry(countRetries)
	cfg, err := pgxpool.ParseConfig(dsn)
	is.NoErr(err)
	cfg.MaxConns = 24
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	is.NoErr(err)
	defer pool.Close()
	_, err = pool.Exec(ctx, handledTable)
	is.NoErr(err)

	f := &fleet{pool: pool}
	traffic, stopTraffic := context.WithCancel(ctx)
	defer stopTraffic()
	accepting, stopAccepting := context.WithCancel(traffic)
	defer stopAccepting()
	for i := range 2 {
		f.accept(accepting, fmt.Sprintf("a%d", i))
	}
	for range 3 {
		f.startV6Worker(traffic, 3)
	}
	testkit.Eventually(t, 2*time.Minute, func() bool { return f.nHandled.Load() >= 50 }, "the v6 workers to handle messages")

	start := time.Now()
	applied, err := m.Up(ctx)
	took := time.Since(start)
	if isDeadlock(err) {
		deadlocks++
	}
	if err != nil {
		t.Errorf("migrate up under workers (after %v): %v", time.Since(start).Round(time.Millisecond), err)
		stopTraffic()
		f.accepters.Wait()
		f.wg.Wait()
		return deadlocks + f.deadlocks.Load(), retries
	}
	is.Equal(applied, versions(7, schema.Version))

	// Today's Worker joins the v6 ones, and today's Client accepts too.
	errs := &errorLog{}
	reg := handler.NewRegistry()
	var todayHandled atomic.Int64
	is.NoErr(reg.Register(handler.Key{Consumer: upgradeConsumer, EventType: "e", SchemaVersion: 1},
		func(ctx context.Context, msg *handler.Msg) error {
			_, err := msg.Tx.Exec(ctx, "INSERT INTO handled (receipt_id, by) VALUES ($1, 'today')", msg.ReceiptID)
			if err == nil {
				todayHandled.Add(1)
			}
			return err
		}))
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Consumers:    []string{upgradeConsumer},
		Concurrency:  3,
		PollInterval: 20 * time.Millisecond,
		Logger:       slog.New(errs),
	})
	is.NoErr(err)
	is.NoErr(w.Start(ctx))
	client, err := inbox.NewClient(pool, inbox.Config{})
	is.NoErr(err)
	f.accepters.Add(1)
	go func() {
		defer f.accepters.Done()
		for n := 0; accepting.Err() == nil; n++ {
			res, err := client.Accept(context.WithoutCancel(accepting), inbox.Message{
				Identity:      inbox.Identity{Scope: inbox.Tenant("t3"), Source: "upgrade-test", Consumer: upgradeConsumer, MessageID: fmt.Sprint("today-", n)},
				EventType:     "e",
				SchemaVersion: 1,
				Payload:       map[string]int{"n": n},
			})
			if err != nil {
				f.fail("today's accept", err)
				continue
			}
			f.accepted.Store(inboxtype.ID(res.ID), struct{}{})
			f.nAccepted.Add(1)
		}
	}()
	testkit.Eventually(t, 2*time.Minute, func() bool { return todayHandled.Load() >= 20 }, "today's worker to handle messages")

	// A later release's migration, under today's workers and the v6 ones.
	later, err := schema.NewMigratorFS(db, laterMigration(t))
	is.NoErr(err)
	later.OnLockRetry(countRetries)
	for range 2 {
		applied, err := later.UpTo(ctx, schema.Version+1)
		if isDeadlock(err) {
			deadlocks++
		}
		is.NoErr(err)
		is.Equal(applied, []int64{schema.Version + 1})
		rolled, err := later.DownTo(ctx, schema.Version)
		if isDeadlock(err) {
			deadlocks++
		}
		is.NoErr(err)
		is.Equal(rolled, []int64{schema.Version + 1})
	}
	stopAccepting()
	f.accepters.Wait() // an accept under way when it stopped commits first
	testkit.Eventually(t, 2*time.Minute, func() bool {
		var left int
		is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_work").Scan(&left))
		return left == 0
	}, "the queue to drain")
	stopTraffic()
	f.wg.Wait()
	is.NoErr(w.Stop(ctx))

	for _, err := range f.errors() {
		t.Errorf("worker traffic: %v", err)
	}
	for _, msg := range errs.all() {
		if strings.Contains(msg, "40P01") {
			deadlocks++
		}
		t.Errorf("today's worker: %s", msg)
	}
	deadlocks += f.deadlocks.Load()

	// Every accepted message was handled once, and nothing else was.
	counts := map[inboxtype.ID]int{}
	rows, err := pool.Query(ctx, "SELECT receipt_id FROM handled")
	is.NoErr(err)
	for rows.Next() {
		var id inboxtype.ID
		is.NoErr(rows.Scan(&id))
		counts[id]++
	}
	is.NoErr(rows.Err())
	accepted := 0
	f.accepted.Range(func(k, _ any) bool {
		accepted++
		if n := counts[k.(inboxtype.ID)]; n != 1 {
			t.Errorf("message %v handled %d times", k, n)
		}
		delete(counts, k.(inboxtype.ID))
		return true
	})
	for id, n := range counts {
		t.Errorf("receipt %v handled %d times but never accepted", id, n)
	}
	unsettled, err := pool.Query(ctx, "SELECT id, status FROM pginbox_receipts_live WHERE status <> 'COMPLETED'")
	is.NoErr(err)
	for unsettled.Next() {
		var id inboxtype.ID
		var status string
		is.NoErr(unsettled.Scan(&id, &status))
		t.Errorf("receipt %v is %s, not COMPLETED", id, status)
	}
	is.NoErr(unsettled.Err())
	t.Logf("migrate up took %v under traffic; %d messages accepted, %d handled by the v6 workers and %d by today's; migrations gave way %d times; %d deadlocks",
		took.Round(time.Millisecond), accepted, f.nHandled.Load(), todayHandled.Load(), retries, deadlocks)
	return deadlocks, retries
}

// laterMigration is pginbox's migrations and one of the next version that
// changes pginbox_receipts and pginbox_work as a later release would, locking
// them first as every such migration must (TestMigrationsLockTheirTablesFirst).
func laterMigration(t *testing.T) fs.FS {
	t.Helper()
	files := fstest.MapFS{}
	entries, err := fs.Glob(schema.FS(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range entries {
		b, err := fs.ReadFile(schema.FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = &fstest.MapFile{Data: b}
	}
	lock := `LOCK TABLE pginbox_receipts IN ACCESS EXCLUSIVE MODE;
LOCK TABLE pginbox_work IN ACCESS EXCLUSIVE MODE NOWAIT;
`
	files[fmt.Sprintf("%05d_later.sql", schema.Version+1)] = &fstest.MapFile{Data: []byte(`-- +goose Up
` + lock + `ALTER TABLE pginbox_receipts ADD COLUMN later text;
ALTER TABLE pginbox_work ADD COLUMN later text;

-- +goose Down
` + lock + `ALTER TABLE pginbox_work DROP COLUMN later;
ALTER TABLE pginbox_receipts DROP COLUMN later;
`)}
	return files
}
