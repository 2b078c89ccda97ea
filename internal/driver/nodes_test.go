package driver_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/driver"
)

// sessionBytes is the memory of the session conn runs in.
func sessionBytes(t *testing.T, conn *pgxpool.Conn) int64 {
	t.Helper()
	var n int64
	if err := conn.QueryRow(t.Context(), `SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A session on a Citus worker node that runs a prepared statement on a
// local shard again and again grows with every run of a reused plan (Citus
// 13.2 keeps a plan per run): ReceiptRelease, the worker's release of a
// claim, grew by about 80 KB a run here. The node pools of Nodes plan
// every statement for its parameters and stay flat. The plain pool on the
// same node shows the growth, so the check can fail.
func TestNodePoolSessionsStayFlat(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	coord, err := pgxpool.New(ctx, inboxtest.CitusDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(coord.Close)
	nodes, err := driver.ConnectNodes(ctx, coord, driver.NodesConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nodes.Close)
	s := inboxtype.Tenant("flat")
	i, err := nodes.Of(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	onNode, err := nodes.Pool(coord, i)
	if err != nil {
		t.Fatal(err)
	}
	plainCfg := onNode.Config().Copy()
	delete(plainCfg.ConnConfig.RuntimeParams, "plan_cache_mode")
	plain, err := pgxpool.NewWithConfig(ctx, plainCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)

	const runs = 300
	grow := func(pool *pgxpool.Pool) int64 {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		q := db.New(conn)
		release := func() {
			if _, err := q.ReceiptRelease(ctx, db.ReceiptReleaseParams{ID: inboxtype.New(), ClaimToken: inboxtype.New(), ScopeID: s.ID}); err != nil {
				t.Fatal(err)
			}
		}
		for range 10 { // past the plan cache's first custom plans
			release()
		}
		before := sessionBytes(t, conn)
		for range runs {
			release()
		}
		return sessionBytes(t, conn) - before
	}
	if g := grow(plain); g < runs*10_000 {
		t.Fatalf("a plain session on the node grew %d bytes in %d runs: the growth this test guards against did not show", g, runs)
	}
	if g := grow(onNode); g > 1<<20 {
		t.Errorf("a session of a node pool grew %d bytes in %d runs of one statement, want flat", g, runs)
	}
}

// Of finds a scope's node once and then from its cache; a scope's node is
// the one Citus places its shard on.
func TestNodesOfScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	coord, err := pgxpool.New(ctx, inboxtest.CitusDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(coord.Close)
	nodes, err := driver.ConnectNodes(ctx, coord, driver.NodesConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nodes.Close)
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		i, err := nodes.Of(ctx, inboxtype.Tenant(id))
		if err != nil {
			t.Fatal(err)
		}
		var port int
		if err := coord.QueryRow(ctx, `SELECT nodeport FROM citus_shards
			WHERE shardid = get_shard_id_for_distribution_column('pginbox_receipts', $1::text)`, id).Scan(&port); err != nil {
			t.Fatal(err)
		}
		if addr := nodes.Addr(i); addr != "127.0.0.1:"+strconv.Itoa(port) {
			t.Errorf("scope %s: node %s, want the shard's node 127.0.0.1:%d", id, addr, port)
		}
	}
	before := nodes.Lookups()
	if _, err := nodes.Of(ctx, inboxtype.Tenant("a")); err != nil {
		t.Fatal(err)
	}
	if n := nodes.Lookups() - before; n != 0 {
		t.Errorf("a scope seen before was looked up again (%d lookups)", n)
	}
}

// A pool whose connection string leaves sslmode out (prefer: TLS first,
// then without) reaches the nodes as it reaches the coordinator: its node
// pools keep the fallback without TLS.
func TestNodePoolsKeepTheFallbacks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := inboxtest.CitusDatabase(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cc := cfg.ConnConfig
	prefer, err := pgxpool.New(ctx, fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=prefer", cc.Host, cc.Port, cc.User, cc.Database))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prefer.Close)
	nodes, err := driver.ConnectNodes(ctx, prefer, driver.NodesConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nodes.Close)
	for i := range nodes.Count() {
		p, err := nodes.Pool(prefer, i)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Ping(ctx); err != nil {
			t.Errorf("node %s with sslmode prefer: %v", nodes.Addr(i), err)
		}
	}
}
