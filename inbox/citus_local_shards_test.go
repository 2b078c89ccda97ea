package inbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// warnings is a slog.Handler that keeps the messages of warnings.
type warnings struct {
	mu   *sync.Mutex
	msgs *[]string
}

func newWarnings() warnings { return warnings{mu: &sync.Mutex{}, msgs: new([]string)} }

func (h warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h warnings) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.msgs = append(*h.msgs, r.Message)
	return nil
}
func (h warnings) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h warnings) WithGroup(string) slog.Handler      { return h }

// matching counts the warnings containing sub.
func (h warnings) matching(sub string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range *h.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

// pginbox's sessions belong on a coordinator without shards: on a node that
// holds shards, Citus 13.2 grows the session with every reused plan run on
// a local shard, and NOTIFY wakes only that node's listeners. A Client,
// Worker or Admin whose pool connects to such a node says so once; on the
// coordinator it says nothing.
func TestCitusWarnsOnANodeWithShards(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	coord, err := pgxpool.New(ctx, inboxtest.CitusDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig = workerNodeConfigs(t, coord)[0]
	node, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()

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
		log := newWarnings()
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
		if got := log.matching(sub); got != c.want {
			t.Errorf("%s: the client warned %d times, want %d (warnings: %q)", c.name, got, c.want, *log.msgs)
		}

		log = newWarnings()
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
		if got := log.matching(sub); got != c.want {
			t.Errorf("%s: the worker warned %d times, want %d (warnings: %q)", c.name, got, c.want, *log.msgs)
		}

		log = newWarnings()
		admin, err := inbox.NewAdmin(c.pool, inbox.AdminConfig{Logger: slog.New(log)})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := admin.ForTenant("tenant-0").List(ctx, inbox.ListParams{}); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		if got := log.matching(sub); got != c.want {
			t.Errorf("%s: the admin warned %d times, want %d (warnings: %q)", c.name, got, c.want, *log.msgs)
		}
	}
}
