package inbox_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/citustest"
)

// On Citus, Accept's delegated pginbox_accept runs in the session the
// coordinator keeps on the scope's worker node, for as long as that
// connection lives. Citus 13.2 keeps a shard plan for a reused (generic)
// plan of a routed statement, but its lookup never finds it: every call
// planned the function's inserts again and appended the plan to the
// session's cache, about 110 KB per accept that the node's backend never
// gave back. The function runs on custom plans, which Citus does not cache.
// The drain (claims, handler transactions, completions) is measured too:
// no pginbox session on the coordinator or the nodes may grow with the
// messages it handles.
func TestCitusAcceptMemoryStaysFlat(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := inboxtest.CitusDatabase(t)
	open := func(conns int32) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = conns
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	pool := open(1) // one coordinator session: one backend per worker node runs every call
	client, err := inbox.NewClient(pool, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: "orders", EventType: "order.created", SchemaVersion: 1},
		func(context.Context, *handler.Msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	w, err := inbox.NewWorker(open(4), reg, inbox.WorkerConfig{Consumers: []string{"orders"}, Concurrency: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	accept := func(n int) {
		t.Helper()
		for range n {
			if _, err := client.Accept(ctx, inbox.Message{
				Identity:  inbox.Identity{Scope: inbox.Tenant(fmt.Sprintf("tenant-%02d", sent%16)), Source: "shop", Consumer: "orders", MessageID: strconv.Itoa(sent)},
				EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{"n": sent},
			}); err != nil {
				t.Fatal(err)
			}
			sent++
		}
	}
	drain := func(want int) {
		t.Helper()
		if n, err := w.Drain(ctx); err != nil || n != want {
			t.Fatalf("the worker drained %d messages (%v), want %d", n, err, want)
		}
	}
	// The connections to the nodes are open and the plans made.
	accept(200)
	drain(200)

	before := backendsMemory(t, pool)
	const calls = 1000
	accept(calls)
	mid := backendsMemory(t, pool)
	drain(calls)
	after := backendsMemory(t, pool)
	for _, c := range []struct {
		phase    string
		from, to map[int32]int64
	}{{"accepts", before, mid}, {"drained messages", mid, after}} {
		grew := growth(c.from, c.to)
		t.Logf("%d %s: pginbox's backends on the coordinator and the nodes grew by %d KB (%d bytes per message)", calls, c.phase, grew>>10, grew/calls)
		// Before the fix: about 110 MB for 1,000 accepts.
		if limit := int64(16 << 20); grew > limit {
			t.Errorf("pginbox's backends on the coordinator and the worker nodes grew by %d MB over %d %s (%d KB per message); want under %d MB",
				grew>>20, calls, c.phase, grew/calls>>10, limit>>20)
		}
	}
}

// growth sums how much each backend in both readings grew (a backend that
// started or ended between them is left out).
func growth(from, to map[int32]int64) int64 {
	var sum int64
	for pid, rss := range to {
		if was, ok := from[pid]; ok {
			sum += rss - was
		}
	}
	return sum
}

// backendsMemory reads the private memory (RssAnon) of each client backend
// of pool's database on the coordinator and on every Citus worker node, by
// process ID (the nodes run on this machine): the sessions of pool's
// connections, and those the coordinator opened on the nodes.
func backendsMemory(t *testing.T, pool *pgxpool.Pool) map[int32]int64 {
	t.Helper()
	ctx := t.Context()
	out := map[int32]int64{}
	for _, cc := range append(citustest.WorkerNodeConfigs(t, pool), pool.Config().ConnConfig.Copy()) {
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`)
		if err != nil {
			t.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			out[pid] = rssAnon(t, int(pid))
		}
	}
	return out
}

// rssAnon reads a local process's private resident memory in bytes.
func rssAnon(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("skipping: reading a server process's memory needs Linux's /proc: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status: RssAnon %q: %v", pid, v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no RssAnon line", pid)
	return 0
}
