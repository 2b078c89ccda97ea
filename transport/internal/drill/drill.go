// Package drill holds what the transport adapters' failure drills share: a
// PostgreSQL pool behind a fault proxy, and a ledger that checks, in the
// database, that every sent message was applied exactly once.
package drill

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/internal/testkit"
)

// Pool is a pool on dsn, closed at test end. configure may be nil.
func Pool(t testing.TB, dsn string, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 12
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// ProxiedPool is a pool on dsn whose connections pass through a fault proxy
// in front of the database server (a unix socket or TCP address).
func ProxiedPool(t testing.TB, dsn string) (*faultproxy.Proxy, *pgxpool.Pool) {
	t.Helper()
	cc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, address := pgconn.NetworkAddress(cc.Host, cc.Port)
	p, err := faultproxy.New(network, address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() }) // registered first: runs after the pool closed
	return p, Pool(t, dsn, func(c *pgxpool.Config) {
		c.ConnConfig.Host, c.ConnConfig.Port, c.ConnConfig.Fallbacks = "127.0.0.1", p.Port(), nil
		c.ConnConfig.ConnectTimeout = 3 * time.Second
	})
}

// Eventually is testkit.Eventually with the arguments in the order the
// adapters' tests use.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, timeout, cond, "%s", what)
}

// Event type and version of the messages a Ledger applies.
const (
	EventType     = "drill.event"
	SchemaVersion = 1
)

// Ledger is a business table written by a real inbox worker: one row per
// handled message, with no unique key, so a message applied twice shows up.
type Ledger struct {
	pool   *pgxpool.Pool
	worker *inbox.Worker
}

// NewLedger creates the table in pool's database and a worker for consumer
// whose handler inserts a row per message, in the receipt's transaction.
func NewLedger(t testing.TB, pool *pgxpool.Pool, consumer string) *Ledger {
	t.Helper()
	if _, err := pool.Exec(context.Background(), "CREATE TABLE drill_applied (message_id text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	reg := handler.NewRegistry()
	err := reg.Register(handler.Key{Consumer: consumer, EventType: EventType, SchemaVersion: SchemaVersion},
		func(ctx context.Context, m *handler.Msg) error {
			_, err := m.Tx.Exec(ctx, "INSERT INTO drill_applied (message_id) VALUES ($1)", m.MessageID)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{consumer}, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	return &Ledger{pool: pool, worker: w}
}

// Drain applies every due receipt.
func (l *Ledger) Drain(t testing.TB) { inboxtest.Drain(t, l.worker) }

// Receipts is the number of receipts stored.
func (l *Ledger) Receipts(t testing.TB) int {
	t.Helper()
	var n int
	if err := l.pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_receipts_live").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Tally counts, against the sent message IDs, the distinct messages applied,
// those never applied (lost) and those applied more than once (doubled).
func (l *Ledger) Tally(t testing.TB, sent []string) (applied, lost, doubled int) {
	t.Helper()
	rows, err := l.pool.Query(context.Background(), "SELECT message_id, count(*) FROM drill_applied GROUP BY message_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	times := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		times[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range sent {
		switch n := times[id]; {
		case n == 0:
			lost++
		case n > 1:
			doubled++
		}
	}
	return len(times), lost, doubled
}

// Report drains the ledger, prints the drill's summary line and fails the
// test unless every sent message was applied exactly once.
func (l *Ledger) Report(t testing.TB, drill string, sent []string, acked int64) {
	t.Helper()
	l.Drain(t)
	applied, lost, doubled := l.Tally(t, sent)
	line := fmt.Sprintf("%s: sent=%d acked=%d applied=%d lost=%d doubled=%d", drill, len(sent), acked, applied, lost, doubled)
	t.Log(line)
	if lost != 0 || doubled != 0 || applied != len(sent) {
		t.Fatalf("drill failed: %s", line)
	}
}

// Run starts run (a consumer's Run) and returns a function that cancels its
// context and checks that it returned nil within a minute. The test's
// cleanup calls it too.
func Run(t testing.TB, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v after cancel, want nil", err)
				}
			case <-time.After(time.Minute):
				t.Errorf("Run did not return within a minute of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
