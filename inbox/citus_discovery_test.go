package inbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/citustest"
)

// On Citus, the worker's discovery reads (the claim's and lease recovery's,
// one read per shard) run over the one connection per worker node that each
// coordinator session keeps. Citus would otherwise open more connections to
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
	deadline := time.Now().Add(60 * time.Second)
	for handled.Load() < messages {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages handled after 60s", handled.Load(), messages)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 10 {
		if _, err := w.RecoverExpired(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Each pool connection's session keeps one connection per worker node;
	// nothing more should have been opened.
	if got, most := conns.Opened(t)-before, int64(poolSize*conns.Workers); got > most {
		t.Errorf("the drain of %d messages opened %d connections to the worker nodes, want at most %d (one per pool connection and node)",
			messages, got, most)
	}
}
