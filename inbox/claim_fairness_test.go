package inbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// A tenant's burst cannot starve the others: a claim serves the scopes with
// due work in turns, so a cold tenant's message accepted behind a hot
// tenant's backlog runs long before that backlog drains.
func TestClaimsServeScopesInTurns(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})

	const hot = 1000
	msgs := make([]inbox.Message, hot)
	for i := range msgs {
		msgs[i] = orderMsg(fmt.Sprintf("hot-%04d", i), map[string]int{"n": i})
		msgs[i].Scope = inbox.Tenant("hot")
	}
	for len(msgs) > 0 {
		_, err := c.AcceptBatch(ctx, msgs[:100])
		is.NoErr(err)
		msgs = msgs[100:]
	}
	cold := orderMsg("cold-1", map[string]int{"n": 1})
	cold.Scope = inbox.Tenant("cold")
	_, err := c.Accept(ctx, cold)
	is.NoErr(err)

	var mu sync.Mutex
	var order []string // tenant of each handler run, in order
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		mu.Lock()
		order = append(order, m.Scope.ID)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		return nil
	})
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 2, ClaimBatch: 20})
	is.NoErr(w.Start(ctx))
	eventually(t, 60*time.Second, "the cold tenant's message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range order {
			if s == "cold" {
				return true
			}
		}
		return false
	})
	is.NoErr(w.Stop(ctx))

	mu.Lock()
	defer mu.Unlock()
	before := 0
	for _, s := range order {
		if s == "cold" {
			break
		}
		before++
	}
	// The first claim already serves both scopes: at most one claim's worth
	// of hot messages run first.
	if before > 20 {
		t.Fatalf("%d of the hot tenant's %d messages ran before the cold tenant's one message, want at most one claim (20)", before, hot)
	}
}
