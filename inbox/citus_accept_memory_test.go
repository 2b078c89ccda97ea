package inbox_test

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
func TestCitusAcceptMemoryStaysFlat(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := inboxtest.CitusDatabase(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // one coordinator session: one backend per worker node runs every call
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	client, err := inbox.NewClient(pool, inbox.Config{})
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
	accept(200) // the connections to the nodes are open, the plans made

	before := workerBackendsMemory(t, pool)
	const calls = 1000
	accept(calls)
	after := workerBackendsMemory(t, pool)
	grew := after - before
	t.Logf("worker nodes' backends: %d KB before, %d KB after %d accepts (%d bytes per accept)", before>>10, after>>10, calls, grew/calls)
	// Before the fix: about 110 MB for 1,000 accepts.
	if limit := int64(16 << 20); grew > limit {
		t.Fatalf("the worker nodes' backends grew by %d MB over %d accepts (%d KB per accept); want under %d MB",
			grew>>20, calls, grew/calls>>10, limit>>20)
	}
}

// workerBackendsMemory sums the private memory (RssAnon) of the client
// backends of pool's database on every Citus worker node: the sessions the
// coordinator opened there.
func workerBackendsMemory(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	ctx := t.Context()
	var total int64
	for _, cc := range citustest.WorkerNodeConfigs(t, pool) {
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
			total += rssAnon(t, int(pid))
		}
	}
	return total
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
