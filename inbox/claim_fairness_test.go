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

// A claim serves fewer scopes rather than give each a share smaller than a
// handler transaction: with 16 tenants, ClaimBatch 40 and MessagesPerTx 10,
// a claim serves 4 tenants with 10 each (not 16 with 3 each), and the
// transactions carry full batches.
func TestClaimSharesFillHandlerTransactions(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	const tenants, each = 16, 20
	var msgs []inbox.Message
	for i := range each {
		for tn := range tenants {
			m := orderMsg(fmt.Sprintf("t%02d-%02d", tn, i), map[string]int{"n": i})
			m.Scope = inbox.Tenant(fmt.Sprintf("tenant-%02d", tn))
			msgs = append(msgs, m)
		}
	}
	_, err := c.AcceptBatch(ctx, msgs)
	is.NoErr(err)

	w := newWorker(t, pool, registry(t, func(context.Context, *handler.Msg) error { return nil }),
		inbox.WorkerConfig{Concurrency: 4, MessagesPerTx: 10, ClaimBatch: 40, PollInterval: 50 * time.Millisecond})
	is.NoErr(w.Start(ctx))
	eventually(t, 60*time.Second, "every receipt COMPLETED", func() bool {
		return countRows(t, pool, "status = 'COMPLETED'") == tenants*each
	})
	is.NoErr(w.Stop(ctx))

	// A handler transaction's completions share completed_at (now(), the
	// transaction's start): one value per transaction and scope.
	var txs int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(DISTINCT (completed_at, scope_id)) FROM pginbox_receipts_live").Scan(&txs))
	per := float64(tenants*each) / float64(txs)
	t.Logf("%d messages in %d handler transactions (%.1f each)", tenants*each, txs, per)
	if per < 7 {
		t.Fatalf("%.1f messages per handler transaction, want close to MessagesPerTx (10): shares of a claim too small to fill one", per)
	}
}
