package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
)

// With the worker's sessions on the Citus worker nodes, a handler's emit
// wakes the relays listening on its node: a relay given the same Nodes
// publishes the events at once although it polls once a minute (one
// listening on the coordinator alone would wait for its poll).
func TestCitusRelayHearsEmitsOnTheNodes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, inboxtest.CitusDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	nodes, err := inbox.ConnectNodes(ctx, pool, inbox.NodesConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nodes.Close)

	pub := &recorder{}
	r := newRelay(t, pool, pub, outbox.RelayConfig{Nodes: nodes, PollInterval: time.Minute})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })

	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: "orders", EventType: "order.created", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			_, err := outbox.Emit(ctx, m.Tx, event("", 1))
			return err
		}); err != nil {
		t.Fatal(err)
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{"orders"}, Nodes: nodes, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	client, err := inbox.NewClient(pool, inbox.Config{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	const tenants = 6
	for i := range tenants {
		if _, err := client.Accept(ctx, inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant(fmt.Sprint("relay-", i)), Source: "shop", Consumer: "orders", MessageID: "m"},
			EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{},
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the relay is listening everywhere before the emits.
	testkit.Eventually(t, 30*time.Second, func() bool { return listeners(t, pool) >= 1+nodes.Count() },
		"%d LISTEN sessions of the relay", 1+nodes.Count())
	if n, err := w.Drain(ctx); err != nil || n != tenants {
		t.Fatalf("drain: %d, %v; want %d handled", n, err, tenants)
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return len(pub.published()) >= tenants },
		"%d events published with the relay polling once a minute (the wake-ups on the nodes must reach it)", tenants)
}

// listeners counts the sessions listening for Emit's wake-ups on the
// coordinator and the worker nodes of pool's database.
func listeners(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	err := pool.QueryRow(t.Context(), `SELECT count(*) FROM (
		SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%LISTEN pginbox_outbox%' AND state = 'idle'
		UNION ALL
		SELECT 1 FROM run_command_on_workers($$SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%LISTEN pginbox_outbox%' AND state = 'idle'$$) w,
			generate_series(1, w.result::int)) l`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
