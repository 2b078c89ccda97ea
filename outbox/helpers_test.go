package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
)

func TestMain(m *testing.M) { inboxtest.Main(m) }

// quiet keeps expected failures out of the test output.
var quiet = slog.New(slog.DiscardHandler)

// event is a valid event the tests vary.
func event(key string, n int) outbox.Event {
	return outbox.Event{
		Type:          "order.confirmed",
		SchemaVersion: 1,
		Source:        "orders",
		Destination:   "billing.v1",
		OrderingKey:   key,
		Payload:       map[string]any{"orderId": key, "n": n},
	}
}

// emit commits one transaction emitting evs and returns their IDs.
func emit(t testing.TB, pool *pgxpool.Pool, evs ...outbox.Event) []outbox.ID {
	t.Helper()
	var ids []outbox.ID
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		for _, ev := range evs {
			id, err := outbox.Emit(context.Background(), tx, ev)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func newRelay(t testing.TB, pool *pgxpool.Pool, pub outbox.Publisher, cfg outbox.RelayConfig) *outbox.Relay {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	r, err := outbox.NewRelay(pool, pub, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func drain(t testing.TB, r *outbox.Relay) int {
	t.Helper()
	n, err := r.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// stored is an outbox row as the tests read it.
type stored struct {
	status    string
	attempts  int
	lastError string
	due       bool // available_at <= now()
}

func row(t testing.TB, pool *pgxpool.Pool, id outbox.ID) stored {
	t.Helper()
	var s stored
	err := pool.QueryRow(context.Background(), `SELECT status, attempts, coalesce(last_error, ''), available_at <= now()
		FROM pginbox_outbox WHERE id = $1`, id).Scan(&s.status, &s.attempts, &s.lastError, &s.due)
	if err != nil {
		t.Fatalf("reading event %s: %v", id, err)
	}
	return s
}

func count(t testing.TB, pool *pgxpool.Pool, where string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_outbox WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// recorder is a Publisher that records what it was given and fails the
// events fail says to.
type recorder struct {
	mu    sync.Mutex
	calls [][]outbox.Message
	fail  func(m outbox.Message) error
}

func (r *recorder) Publish(ctx context.Context, msgs []outbox.Message) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, msgs)
	var errs []error
	for i, m := range msgs {
		if r.fail == nil {
			continue
		}
		if err := r.fail(m); err != nil {
			if errs == nil {
				errs = make([]error, len(msgs))
			}
			errs[i] = err
		}
	}
	return errs
}

// published returns the IDs of the messages published, in call order.
func (r *recorder) published() []outbox.ID {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []outbox.ID
	for _, c := range r.calls {
		for _, m := range c {
			if r.fail == nil || r.fail(m) == nil {
				out = append(out, m.ID)
			}
		}
	}
	return out
}

func (r *recorder) messages() []outbox.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []outbox.Message
	for _, c := range r.calls {
		out = append(out, c...)
	}
	return out
}

func ids(evs []outbox.Message) string {
	parts := make([]string, len(evs))
	for i, m := range evs {
		parts[i] = fmt.Sprintf("%s#%v", m.OrderingKey, m.ID)
	}
	return strings.Join(parts, " ")
}

type (
	pgxpoolConfig = pgxpool.Config
	pgxPool       = *pgxpool.Pool
)

func poolOn(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
