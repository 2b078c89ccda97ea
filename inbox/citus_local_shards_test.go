package inbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/citustest"
)

// pginbox's sessions belong on a coordinator without shards: on a node that
// holds shards, Citus 13.2 grows the session with every reused plan run on
// a local shard, and NOTIFY wakes only that node's listeners. A Client,
// Worker or Admin whose pool connects to such a node says so once; on the
// coordinator it says nothing.
func TestCitusWarnsOnANodeWithShards(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	coord, node := citustest.CoordinatorAndNode(t, inboxtest.CitusDatabase(t))

	const sub = "holds shards of pginbox's tables"
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: "orders", EventType: "order.created", SchemaVersion: 1},
		func(context.Context, *handler.Msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		pool *pgxpool.Pool
		want int
	}{{"coordinator", coord, 0}, {"worker node", node, 1}} {
		log := citustest.NewWarnings()
		client, err := inbox.NewClient(c.pool, inbox.Config{Logger: slog.New(log)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := client.Accept(ctx, inbox.Message{
				Identity:  inbox.Identity{Scope: inbox.Tenant(fmt.Sprintf("tenant-%d", i)), Source: "shop", Consumer: "orders", MessageID: c.name + fmt.Sprint(i)},
				EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{},
			}); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		client.Close()
		if got := len(log.Matching(sub)); got != c.want {
			t.Errorf("%s: the client warned %d times, want %d (warnings: %q)", c.name, got, c.want, log.All())
		}

		log = citustest.NewWarnings()
		w, err := inbox.NewWorker(c.pool, reg, inbox.WorkerConfig{Consumers: []string{"orders"}, Logger: slog.New(log)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Drain(ctx); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, err := w.Drain(ctx); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := len(log.Matching(sub)); got != c.want {
			t.Errorf("%s: the worker warned %d times, want %d (warnings: %q)", c.name, got, c.want, log.All())
		}

		log = citustest.NewWarnings()
		admin, err := inbox.NewAdmin(c.pool, inbox.AdminConfig{Logger: slog.New(log)})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := admin.ForTenant("tenant-0").List(ctx, inbox.ListParams{}); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		if got := len(log.Matching(sub)); got != c.want {
			t.Errorf("%s: the admin warned %d times, want %d (warnings: %q)", c.name, got, c.want, log.All())
		}
	}
}
