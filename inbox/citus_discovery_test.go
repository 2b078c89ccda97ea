package inbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/citustest"
	"github.com/pginbox/pginbox/internal/testkit"
)

// On Citus, the worker's discovery reads (the claim's and lease recovery's,
// one read per shard) and an operator purge's run over the one connection
// per worker node that each coordinator session keeps. Citus would otherwise open more connections to
// a node for a statement with many shards there and close them after it: a
// new server process on the node per discovery, which cost the drain more
// than the reads (bench: 0.1 connections opened per message drained). With
// slow start off, Citus opens a connection per pending shard read at once,
// so without the fix every discovery opens about 15 per node here.
func TestCitusDiscoveryOpensNoConnections(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const poolSize, messages = 4, 64
	pool, conns := citustest.CountingPool(t, inboxtest.CitusDatabase(t), poolSize)
	client, err := inbox.NewClient(pool, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range messages {
		if _, err := client.Accept(ctx, inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant(fmt.Sprintf("tenant-%02d", i%16)), Source: "shop", Consumer: "orders", MessageID: fmt.Sprint(i)},
			EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{},
		}); err != nil {
			t.Fatal(err)
		}
	}
	before := conns.Opened(t)

	var handled atomic.Int64
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: "orders", EventType: "order.created", SchemaVersion: 1},
		func(context.Context, *handler.Msg) error { handled.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	// Small claims over few scopes: many discoveries.
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Consumers: []string{"orders"}, Concurrency: 2, ClaimBatch: 2, ClaimScopes: 2,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	testkit.Eventually(t, time.Minute, func() bool { return handled.Load() >= messages },
		"%d messages handled; saw %v", messages, testkit.Lazy(func() string { return fmt.Sprint(handled.Load()) }))
	for range 10 {
		if _, err := w.RecoverExpired(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// An operator's purge lists the scopes with purgeable payloads the same way.
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	purged := 0
	for range 5 { // the first purges every payload, all list the scopes
		res, err := admin.Operator().Purge(ctx, inbox.PurgeParams{Before: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		purged += int(res.Purged)
	}
	if purged != messages {
		t.Fatalf("the operator's purges dropped %d payloads, want %d", purged, messages)
	}

	// Each pool connection's session keeps one connection per worker node;
	// nothing more should have been opened.
	if got, most := conns.Opened(t)-before, int64(poolSize*conns.Workers); got > most {
		t.Errorf("the drain of %d messages and the purges opened %d connections to the worker nodes, want at most %d (one per pool connection and node)",
			messages, got, most)
	}
}

// On Citus the read that lists the scopes with due work groups every due
// row, so with a deep backlog it cost more than the claims it fed (80 ms at
// 300,000 due receipts) and each claim round read it again: a 300,000
// backlog drained at half the rate of a 3,000 one. The rounds after a read
// now reuse it for a few times its cost: here, with 60,000 due receipts,
// far fewer reads than claim rounds.
func TestCitusListingServesSeveralRounds(t *testing.T) {
	t.Parallel()
	pool := poolFor(t, inboxtest.CitusDatabase(t), func(c *pgxpool.Config) { c.MaxConns = 8 })
	seedDue(t, pool, 60_000, 64)
	var listings, rounds atomic.Int64
	var handled atomic.Int64
	reg := registry(t, func(context.Context, *handler.Msg) error { handled.Add(1); return nil })
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 4, MessagesPerTx: 10})
	inbox.SetTestHooks(w, func(int) { rounds.Add(1) }, nil)
	inbox.SetListedHook(w, func(int) { listings.Add(1) })
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	testkit.Eventually(t, 2*time.Minute, func() bool { return handled.Load() >= 1000 }, "1,000 messages handled")
	l, r := listings.Load(), rounds.Load()
	t.Logf("%d listing reads for %d claim rounds", l, r)
	if l*2 > r {
		t.Fatalf("%d listing reads for %d claim rounds: each read should serve several rounds", l, r)
	}
}
