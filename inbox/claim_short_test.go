package inbox_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// A claim round whose scopes each had fewer due receipts than their share
// comes up short, yet other scopes may still have due work: the worker
// claims again at once instead of waiting for a notification or its poll.
// Here every claim serves one scope (ClaimBatch 10, MessagesPerTx 10) and
// every scope holds 3 receipts, so every round comes up short; the poll is a
// minute away and the messages were accepted before the worker listened.
// On Citus a round counted as full only when it filled the whole claim, and
// the worker drained one scope per poll interval (a 3,000-message backlog
// over 64 tenants drained at 188-202/s against 1,254/s after the fix).
func TestClaimsGoOnAfterShortScopes(t *testing.T) {
	t.Parallel()
	onEachLayout(t, func(t *testing.T, pool *pgxpool.Pool) {
		ctx := t.Context()
		c := newClient(t, pool, inbox.Config{})
		const scopes, each = 32, 3
		for i := range scopes * each {
			m := orderMsg(fmt.Sprint(i), map[string]int{"n": i})
			m.Scope = inbox.Tenant(fmt.Sprintf("tenant-%02d", i%scopes))
			if _, err := c.Accept(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		var handled atomic.Int64
		reg := registry(t, func(context.Context, *handler.Msg) error { handled.Add(1); return nil })
		w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 1, MessagesPerTx: 10, ClaimBatch: 10, PollInterval: time.Minute})
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer w.Stop(context.Background())
		testkit.Eventually(t, 30*time.Second, func() bool {
			return handled.Load() == scopes*each
		}, "%d messages handled (the poll is a minute away)", scopes*each)
	}, func(c *pgxpool.Config) { c.MaxConns = 4 })
}
