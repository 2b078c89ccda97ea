package inboxtest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/pgtest"
	"github.com/pginbox/pginbox/schema"
)

func TestMain(m *testing.M) {
	pgtest.SetMigrate(schema.UpDSN)
	pgtest.Main(m)
}

const consumer = "orders.projection.v1"

func setup(t *testing.T, fn handler.Func) (*pgxpool.Pool, *inbox.Client, *inbox.Worker) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.DB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	client, err := inbox.NewClient(pool, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: consumer, EventType: "order.created", SchemaVersion: 1}, fn); err != nil {
		t.Fatal(err)
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Concurrency:  2,
		PollInterval: 20 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return pool, client, w
}

func accept(t *testing.T, c *inbox.Client, id string) inbox.ID {
	t.Helper()
	res, err := c.Accept(context.Background(), inbox.Message{
		Identity:      inbox.Identity{Scope: inbox.Global(), Source: "test", Consumer: consumer, MessageID: id},
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       map[string]string{"orderId": id},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

func ok(context.Context, *handler.Msg) error { return nil }

// fakeT records failures instead of failing the real test. Fatal ends the
// calling goroutine, like testing.T's, so run helpers through fakeT.run.
type fakeT struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
	runtime.Goexit()
}

// run calls fn on a goroutine and returns the failure message, "" if none.
func (f *fakeT) run(fn func(t testing.TB)) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.msgs, "\n")
}

func TestDrainHandlesEverythingDue(t *testing.T) {
	pool, c, w := setup(t, ok)
	var ids []inbox.ID
	for i := range 5 {
		ids = append(ids, accept(t, c, fmt.Sprint("evt-", i)))
	}
	if n := inboxtest.Drain(t, w); n != 5 {
		t.Fatalf("Drain handled %d, want 5", n)
	}
	for _, id := range ids {
		inboxtest.WaitForStatus(t, pool, id, inbox.StatusCompleted, 0)
	}
	if n := inboxtest.Drain(t, w); n != 0 {
		t.Fatalf("second Drain handled %d, want 0", n)
	}
}

func TestDrainFailsTheTestOnError(t *testing.T) {
	_, _, w := setup(t, ok)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	msg := (&fakeT{TB: t}).run(func(t testing.TB) { inboxtest.Drain(t, w) })
	if !strings.Contains(msg, "inboxtest.Drain: ") {
		t.Fatalf("Drain on a started worker reported %q", msg)
	}
}

func TestWaitForStatusWaitsForARunningWorker(t *testing.T) {
	release := make(chan struct{})
	pool, c, w := setup(t, func(ctx context.Context, m *handler.Msg) error {
		<-release
		return nil
	})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	id := accept(t, c, "evt-1")
	inboxtest.WaitForStatus(t, pool, id, inbox.StatusProcessing, 5*time.Second)
	time.AfterFunc(100*time.Millisecond, func() { close(release) })
	r := inboxtest.WaitForStatus(t, pool, id, inbox.StatusCompleted, 5*time.Second)
	if r.Attempts != 1 || r.LastError != "" {
		t.Fatalf("got %+v, want one clean attempt", r)
	}
}

func TestWaitForStatusReturnsTheLastError(t *testing.T) {
	pool, c, w := setup(t, func(context.Context, *handler.Msg) error {
		return handler.Permanent(errors.New("customer deleted"))
	})
	id := accept(t, c, "evt-1")
	inboxtest.Drain(t, w)
	r := inboxtest.WaitForStatus(t, pool, id, inbox.StatusDead, 0)
	if r.LastError != "customer deleted" || r.Attempts != 1 {
		t.Fatalf("got %+v", r)
	}
}

func TestWaitForStatusFailures(t *testing.T) {
	pool, c, w := setup(t, func(context.Context, *handler.Msg) error {
		return handler.Permanent(errors.New("customer deleted"))
	})
	pending := accept(t, c, "evt-pending")
	dead := accept(t, c, "evt-dead")
	if _, err := pool.Exec(context.Background(), "UPDATE pginbox_receipts SET available_at = now() + interval '1 hour' WHERE id = $1", pending); err != nil {
		t.Fatal(err)
	}
	inboxtest.Drain(t, w)

	cases := []struct {
		name    string
		id      inbox.ID
		timeout time.Duration
		want    string
	}{
		{"timeout", pending, 200 * time.Millisecond, "still PENDING after 200ms, want COMPLETED (attempts 0)"},
		// DEAD will not become COMPLETED: fail at once, with the reason.
		{"final status", dead, time.Hour, "is DEAD, want COMPLETED (attempts 1, last error: customer deleted)"},
		{"missing", inbox.ID{1}, time.Hour, "no receipt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			msg := (&fakeT{TB: t}).run(func(t testing.TB) {
				inboxtest.WaitForStatus(t, pool, tc.id, inbox.StatusCompleted, tc.timeout)
			})
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("failure %q does not contain %q", msg, tc.want)
			}
			took := time.Since(start)
			if tc.timeout < time.Hour && took < tc.timeout || took > 10*time.Second {
				t.Fatalf("failed after %v", took)
			}
		})
	}
}
