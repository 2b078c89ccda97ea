package inbox_test

import (
	"context"
	"fmt"
	"sync"
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

// commits reads the transactions committed in pool's database on its server.
func commits(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(t.Context(), `SELECT pg_stat_force_next_flush()`).Scan(new(any)); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(t.Context(), `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// With Nodes, a Client and a Worker run their sessions on the Citus worker
// nodes: accepts (one message, and batches of one scope through
// pginbox_accept_batch), claims, handler transactions and wake-ups all
// happen there, and the coordinator commits nothing for them. Every
// message is handled exactly once, and promptly although the worker polls
// once a minute: the wake-ups sent on the nodes reach it.
func TestCitusNodesRunSessionsOnTheWorkerNodes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := inboxtest.CitusDatabase(t)
	coord, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(coord.Close)
	nodes, err := inbox.ConnectNodes(ctx, coord, inbox.NodesConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nodes.Close)
	if nodes.Count() < 2 {
		t.Fatalf("%d nodes hold shards, want the test kit's 2", nodes.Count())
	}
	client, err := inbox.NewClient(coord, inbox.Config{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)

	var mu sync.Mutex
	handled := map[string]int{}
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: "orders", EventType: "order.created", SchemaVersion: 1},
		func(_ context.Context, m *handler.Msg) error {
			mu.Lock()
			defer mu.Unlock()
			handled[m.Scope.ID+"/"+m.MessageID]++
			return nil
		}); err != nil {
		t.Fatal(err)
	}
	w, err := inbox.NewWorker(coord, reg, inbox.WorkerConfig{
		Consumers: []string{"orders"}, Nodes: nodes, PollInterval: time.Minute,
		Concurrency: 2, MessagesPerTx: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	before := commits(t, coord)
	const tenants, perBatch = 8, 20
	want := 0
	for i := range tenants {
		tenant := fmt.Sprint("nodes-", i)
		msgs := make([]inbox.Message, perBatch)
		for j := range msgs {
			msgs[j] = inbox.Message{
				Identity:  inbox.Identity{Scope: inbox.Tenant(tenant), Source: "shop", Consumer: "orders", MessageID: fmt.Sprint("b-", j)},
				EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{"n": j},
			}
		}
		items, err := client.AcceptBatch(ctx, append(msgs, msgs[0])) // a repeat inside the batch
		if err != nil {
			t.Fatal(err)
		}
		for j, it := range items {
			if it.Outcome != inbox.Accepted && !(j == perBatch && it.Outcome == inbox.Duplicate) {
				t.Fatalf("%s item %d: %+v", tenant, j, it)
			}
		}
		res, err := client.Accept(ctx, inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant(tenant), Source: "shop", Consumer: "orders", MessageID: "single"},
			EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{},
		})
		if err != nil || res.Outcome != inbox.Accepted {
			t.Fatalf("%s single accept: %+v, %v", tenant, res, err)
		}
		again, err := client.AcceptBatch(ctx, msgs[:2])
		if err != nil || again[0].Outcome != inbox.Duplicate || again[1].Outcome != inbox.Duplicate {
			t.Fatalf("%s batch again: %+v, %v; want duplicates", tenant, again, err)
		}
		want += perBatch + 1
	}
	n := 0
	testkit.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n = len(handled)
		return n == want
	}, "%d messages handled with the worker polling once a minute (the wake-ups sent on the nodes must reach it); %v handled",
		want, testkit.Lazy(func() string { return fmt.Sprint(n) }))
	mu.Lock()
	for k, n := range handled {
		if n != 1 {
			t.Errorf("%s handled %d times", k, n)
		}
	}
	mu.Unlock()
	// The coordinator runs Citus's maintenance (a few commits a second)
	// and nothing of pginbox's: well under one commit per message.
	if d := commits(t, coord) - before; d > int64(want)/4 {
		t.Errorf("the coordinator committed %d transactions for %d messages: sessions still go through it", d, want)
	}
}

// With Nodes, group commit sends each flush's calls per node, so a flush
// over tenants of both nodes commits on each node alone: no two-phase
// commit, no command sent from one node to another.
func TestCitusNodesGroupCommitCommitsOnEachNode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	coord, rc := citustest.Pool(t, inboxtest.CitusDatabase(t))
	nodes, err := inbox.ConnectNodes(ctx, coord, inbox.NodesConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nodes.Close)
	client, err := inbox.NewClient(coord, inbox.Config{Nodes: nodes, GroupCommit: true, GroupCommitMaxWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	// One warm-up accept per tenant finds its node.
	const tenants = 8
	accept := func(i int, id string) error {
		_, err := client.Accept(ctx, inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant(fmt.Sprint("gc-", i)), Source: "shop", Consumer: "orders", MessageID: id},
			EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{},
		})
		return err
	}
	for i := range tenants {
		if err := accept(i, "warm"); err != nil {
			t.Fatal(err)
		}
	}
	rc.Reset()
	var wg sync.WaitGroup
	errs := make(chan error, 4*tenants)
	for i := range 4 * tenants {
		wg.Go(func() { errs <- accept(i%tenants, fmt.Sprint("m-", i)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if l := rc.Matching("PREPARE TRANSACTION"); len(l) > 0 {
		t.Errorf("group commit committed across nodes in two phases: %s", l[0])
	}
	if l := rc.Lines(); len(l) > 0 {
		t.Errorf("the node sessions sent %d commands to other nodes, e.g. %s", len(l), l[0])
	}
	var n int
	if err := coord.QueryRow(ctx, `SELECT count(*) FROM pginbox_receipts`).Scan(&n); err != nil || n != 5*tenants {
		t.Fatalf("%d receipts (%v), want %d", n, err, 5*tenants)
	}
}

// A node with nothing due is not read again at every claim: after a claim
// found nothing there, the claim loop asks it again only after a wake-up
// from it or a poll interval. With every tenant on one node and the poll a
// minute, the other node's discovery reads stay a handful while the busy
// node's messages are claimed in dozens of rounds.
func TestCitusNodesIdleNodeIsNotReadEveryClaim(t *testing.T) {
	t.Parallel()
	// Once with the busy tenants on each node: a coalesced wake-up must
	// come from the busy node, whichever it is.
	for busyNode := range 2 {
		t.Run(fmt.Sprint("busy node ", busyNode), func(t *testing.T) {
			t.Parallel()
			idleNodeNotReadEveryClaim(t, busyNode)
		})
	}
}

func idleNodeNotReadEveryClaim(t *testing.T, busyNode int) {
	ctx := t.Context()
	coord, err := pgxpool.New(ctx, inboxtest.CitusDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(coord.Close)
	nodes, err := inbox.ConnectNodes(ctx, coord, inbox.NodesConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nodes.Close)
	// Tenants whose shards are all on one node, the busyNode-th.
	var busy int
	if err := coord.QueryRow(ctx, `SELECT nodeport FROM pg_dist_node WHERE groupid > 0 ORDER BY groupid OFFSET $1 LIMIT 1`, busyNode).Scan(&busy); err != nil {
		t.Fatal(err)
	}
	var tenants []string
	for i := 0; len(tenants) < 4; i++ {
		tenant := fmt.Sprint("idle-", i)
		var port int
		if err := coord.QueryRow(ctx, `SELECT nodeport FROM citus_shards
			WHERE shardid = get_shard_id_for_distribution_column('pginbox_receipts', $1::text)`, tenant).Scan(&port); err != nil {
			t.Fatal(err)
		}
		if port == busy {
			tenants = append(tenants, tenant)
		}
	}
	client, err := inbox.NewClient(coord, inbox.Config{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	var mu sync.Mutex
	handled := 0
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: "orders", EventType: "order.created", SchemaVersion: 1},
		func(context.Context, *handler.Msg) error {
			mu.Lock()
			defer mu.Unlock()
			handled++
			return nil
		}); err != nil {
		t.Fatal(err)
	}
	w, err := inbox.NewWorker(coord, reg, inbox.WorkerConfig{
		Consumers: []string{"orders"}, Nodes: nodes, PollInterval: time.Minute, Concurrency: 2, ClaimBatch: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	var empty, full atomic.Int64
	inbox.SetListedHook(w, func(scopes int) {
		if scopes == 0 {
			empty.Add(1)
		} else {
			full.Add(1)
		}
	})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-done })
	const messages = 200
	for i := range messages {
		if _, err := client.Accept(ctx, inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant(tenants[i%len(tenants)]), Source: "shop", Consumer: "orders", MessageID: fmt.Sprint("m-", i)},
			EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{},
		}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	testkit.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n = handled
		return n == messages
	}, "%d messages handled; %v handled", messages, testkit.Lazy(func() string { return fmt.Sprint(n) }))
	// The idle node: a read at start, and one after each wake-up the
	// worker cannot place (none here); the busy node's reads found work.
	if e := empty.Load(); e > 5 {
		t.Errorf("%d discovery reads found nothing (the idle node read at every claim?) while %d found work", e, full.Load())
	}
}
