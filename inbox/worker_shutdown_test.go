package inbox_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

func stopWorker(t testing.TB, w *inbox.Worker) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := w.Stop(ctx)
	return time.Since(start), err
}

func TestStopLetsRunningHandlerFinish(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, _ := newPool(t)
	setupEffects(t, pool)
	id := acceptAll(t, newClient(t, pool, inbox.Config{}), orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))[0]

	entered, finish := make(chan struct{}), make(chan struct{})
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		close(entered)
		<-finish // still running when Stop begins
		return writeEffect(ctx, m, "w")
	}), inbox.WorkerConfig{ShutdownGrace: 5 * time.Second})
	is.NoErr(w.Start(context.Background()))
	testkit.WaitFor(t, entered, 10*time.Second, "the handler to start")

	stopped := make(chan error, 1)
	go func() {
		_, err := stopWorker(t, w)
		stopped <- err
	}()
	testkit.Eventually(t, 10*time.Second, func() bool { return inbox.WorkerStopping(w) }, "Stop to begin")
	finished := time.Now()
	close(finish)
	is.NoErr(testkit.WaitFor(t, stopped, 30*time.Second, "Stop to return"))
	if took := time.Since(finished); took > 4*time.Second {
		t.Fatalf("Stop returned %v after the handler finished: it waited for the grace period", took)
	}
	st := stateOf(t, pool, id)
	is.Equal(st.Status, "COMPLETED")
	is.Equal(st.Attempts, 1)
	is.Equal(effectCount(t, pool, "true"), 1)
}

func TestStopCancelsHandlerPastGrace(t *testing.T) {
	t.Parallel()
	const grace = 200 * time.Millisecond
	cases := map[string]func(ctx context.Context) error{
		// Returns as soon as it is cancelled, after the grace period.
		"handler honours cancellation": func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		},
		// Returns nil after it was cancelled, as if it had finished: too
		// late to commit.
		"handler ignores its context": func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		},
	}
	for name, wait := range cases {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			pool, _ := newPool(t)
			setupEffects(t, pool)
			id := acceptAll(t, newClient(t, pool, inbox.Config{}), orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))[0]

			entered := make(chan struct{})
			var cause error
			w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
				if err := writeEffect(ctx, m, "w"); err != nil {
					return err
				}
				close(entered)
				err := wait(ctx)
				cause = context.Cause(ctx)
				return err
			}), inbox.WorkerConfig{ShutdownGrace: grace})
			is.NoErr(w.Start(context.Background()))
			testkit.WaitFor(t, entered, 10*time.Second, "the handler to start")

			took, err := stopWorker(t, w)
			is.NoErr(err)
			t.Logf("Stop took %v", took.Round(time.Millisecond))
			if took < grace {
				t.Fatalf("Stop took %v, less than the grace period", took)
			}
			if !errors.Is(cause, inbox.ErrWorkerShutdown) {
				t.Fatalf("handler context cause = %v, want ErrWorkerShutdown", cause)
			}
			st := stateOf(t, pool, id)
			is.Equal(st.Status, "PENDING") // released, not left PROCESSING
			is.Equal(st.Attempts, 0)       // the interrupted attempt is not spent
			is.Equal(effectCount(t, pool, "true"), 0)
		})
	}
}

func TestStopReleasesUnstartedClaims(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, _ := newPool(t)
	setupEffects(t, pool)
	c := newClient(t, pool, inbox.Config{})
	ids := acceptAll(t, c,
		orderMsg("evt-1", raw(`{"orderId":"o-1"}`)),
		orderMsg("evt-2", raw(`{"orderId":"o-2"}`)),
		orderMsg("evt-3", raw(`{"orderId":"o-3"}`)))

	var calls atomic.Int32
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		calls.Add(1)
		return writeEffect(ctx, m, "w")
	}), inbox.WorkerConfig{Concurrency: 3})
	// Hold the first claim until Stop has begun, so its receipts reach the
	// handlers only after shutdown started.
	claimed, proceed := make(chan int, 1), make(chan struct{})
	var once sync.Once
	inbox.SetTestHooks(w, func(n int) {
		once.Do(func() {
			claimed <- n
			<-proceed
		})
	}, nil)

	is.NoErr(w.Start(context.Background()))
	select {
	case n := <-claimed:
		is.Equal(n, 3)
	case <-time.After(10 * time.Second):
		t.Fatal("nothing claimed")
	}
	stopped := make(chan error, 1)
	go func() {
		_, err := stopWorker(t, w)
		stopped <- err
	}()
	testkit.Eventually(t, 10*time.Second, func() bool { return inbox.WorkerStopping(w) }, "Stop to begin")
	close(proceed)
	is.NoErr(<-stopped)

	is.Equal(calls.Load(), int32(0))
	for _, id := range ids {
		st := stateOf(t, pool, id)
		is.Equal(st.Status, "PENDING")
		is.Equal(st.Attempts, 0)
	}
	is.Equal(effectCount(t, pool, "true"), 0)
}

// idleInTransaction counts sessions of this database holding an open transaction
// while doing nothing.
func idleInTransaction(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
