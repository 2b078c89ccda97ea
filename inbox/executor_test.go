package inbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

func TestHandlerPastDeadlineCannotCommit(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	cases := map[string]struct {
		// blocks past the deadline, ignoring ctx
		run func(m *handler.Msg, unblock <-chan struct{}) error
		// whether the transaction sits idle while the handler blocks
		idle bool
	}{
		"sleeps holding the transaction": {
			run: func(m *handler.Msg, unblock <-chan struct{}) error {
				<-unblock
				return nil
			},
			idle: true,
		},
		"runs a statement past the deadline": {
			run: func(m *handler.Msg, unblock <-chan struct{}) error {
				_, err := m.Tx.Exec(context.Background(), "SELECT pg_sleep(30)")
				<-unblock
				return err
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			pool, _ := newPool(t)
			setupEffects(t, pool)
			id := acceptAll(t, newClient(t, pool, inbox.Config{}), orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))[0]

			wrote, unblock := make(chan struct{}), make(chan struct{})
			w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
				if err := writeEffect(ctx, m, "w"); err != nil {
					return err
				}
				close(wrote)
				return tc.run(m, unblock)
			}), inbox.WorkerConfig{HandlerTimeout: timeout})
			done := make(chan error, 1)
			go func() {
				_, err := w.Drain(context.Background())
				done <- err
			}()
			testkit.WaitFor(t, wrote, 10*time.Second, "the business write")
			start := time.Now()

			// While the handler still blocks, the server ends its transaction.
			if tc.idle {
				testkit.Eventually(t, 10*time.Second, func() bool {
					return idleInTransaction(t, pool) == 0
				}, "the idle transaction to be ended")
			} else {
				sleeping := func() int {
					var n int
					is.NoErr(pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
						WHERE datname = current_database() AND query = 'SELECT pg_sleep(30)' AND state = 'active'`).Scan(&n))
					return n
				}
				testkit.Eventually(t, 10*time.Second, func() bool { return sleeping() == 1 }, "pg_sleep to start")
				testkit.Eventually(t, 10*time.Second, func() bool { return sleeping() == 0 }, "pg_sleep to be cancelled")
			}
			t.Logf("transaction ended %v after the business write", time.Since(start).Round(time.Millisecond))
			is.Equal(effectCount(t, pool, "true"), 0)
			close(unblock)
			is.NoErr(<-done)

			st := stateOf(t, pool, id)
			is.Equal(st.Status, "RETRYABLE")
			is.Equal(st.Attempts, 1)
			if st.LastError == nil || !strings.Contains(*st.LastError, "deadline") {
				t.Fatalf("last_error = %s, want it to mention the deadline", deref(st.LastError))
			}
			is.Equal(effectCount(t, pool, "true"), 0)
		})
	}
}
