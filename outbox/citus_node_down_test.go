package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/citustest"
	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
)

// With one Citus worker node stopped, a running relay still publishes the
// other node's events although its discovery read (every shard) fails: it
// claims from the scopes it saw recently and skips the stopped node's.
func TestCitusRelayNodeDownOtherNodePublishes(t *testing.T) {
	ctx := t.Context()
	c, dsn := citustest.Private(t)
	tenants := citustest.TenantOnEachWorker(t, c, "pginbox_outbox")
	down, up := tenants[0], tenants[1]
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rec := &recorder{}
	r := newRelay(t, pool, rec, outbox.RelayConfig{PollInterval: 100 * time.Millisecond})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done })
	waitPublished := func(ids []outbox.ID) {
		t.Helper()
		missing := 0
		testkit.Eventually(t, 30*time.Second, func() bool {
			got := rec.published()
			missing = 0
			for _, id := range ids {
				if !slices.Contains(got, id) {
					missing++
				}
			}
			return missing == 0
		}, "%d events published; %v missing", len(ids), testkit.Lazy(func() string { return fmt.Sprint(missing) }))
	}
	// Both nodes up: the relay sees both tenants.
	waitPublished(append(emitAs(t, pool, down, event("", 1)), emitAs(t, pool, up, event("", 1))...))

	if err := c.Workers[0].Shutdown(pgcluster.ShutdownFast); err != nil {
		t.Fatal(err)
	}
	waitPublished(emitAs(t, pool, up, event("", 2), event("", 3), event("", 4)))

	if err := c.Workers[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitPublished(emitAs(t, pool, down, event("", 5)))
}
