package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/citustest"
	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/testkit"
)

// On Citus, Accept runs on the scope's node alone: every command Citus
// sends goes to that node, with a plain COMMIT (no PREPARE TRANSACTION); a
// duplicate is still a Duplicate.
func TestCitusAcceptRoutesToOneNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, rc := citusPool(t)
	client, err := inbox.NewClient(pool, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	msg := inbox.Message{
		Identity:  inbox.Identity{Scope: inbox.Tenant("tenant-r"), Source: "shop", Consumer: "orders", MessageID: "m-1"},
		EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{"n": 1},
	}
	if _, err := client.Accept(ctx, msg); err != nil { // the layout probe and first connections
		t.Fatal(err)
	}
	rc.Reset()
	msg.MessageID = "m-2"
	res, err := client.Accept(ctx, msg)
	if err != nil || res.Outcome != inbox.Accepted {
		t.Fatalf("accept: %+v, %v", res, err)
	}
	port := fmt.Sprintf("127.0.0.1:%d ", nodeOf(t, pool, "pginbox_receipts", "tenant-r"))
	var sent int
	lines := rc.Lines()
	for _, l := range lines {
		sent++
		if !strings.Contains(l, port) {
			t.Errorf("accept sent a command to another node than the scope's (%s): %s", port, l)
		}
		if strings.Contains(l, "PREPARE TRANSACTION") {
			t.Errorf("accept committed in two phases: %s", l)
		}
	}
	if sent == 0 {
		t.Fatalf("no remote command was logged: the test proved nothing")
	}
	var queued int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pginbox_work WHERE scope_id = 'tenant-r' AND receipt_id = $1`, res.ID).Scan(&queued); err != nil || queued != 1 {
		t.Fatalf("queue rows of the accepted receipt: %d (%v), want 1", queued, err)
	}
	dup, err := client.Accept(ctx, msg)
	if err != nil || dup.Outcome != inbox.Duplicate || dup.ID != res.ID {
		t.Fatalf("accept again: %+v, %v; want Duplicate of %v", dup, err, res.ID)
	}
	msg.Payload = map[string]any{"n": 2}
	if _, err := client.Accept(ctx, msg); !errors.As(err, new(*inbox.ConflictError)) {
		t.Fatalf("accept of another payload: %v, want a *ConflictError", err)
	}
}

// nodeDownRig is a private Citus cluster (coordinator and two worker nodes)
// with a worker running for consumer "orders" at poll, a tenant on each
// worker node, and a count of the messages its handler ran per tenant.
type nodeDownRig struct {
	c        *pgcluster.Citus
	tenantOn []string // a tenant whose shard is on c.Workers[i]
	client   *inbox.Client
	mu       sync.Mutex
	handled  map[string]int
	claimLog countingHandler // the worker's "claim failed" records
}

// countingHandler is a slog.Handler that counts the records with the
// message "pginbox worker: claim failed".
type countingHandler struct{ n *atomic.Int64 }

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "pginbox worker: claim failed" {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

func newNodeDownRig(t *testing.T, poll time.Duration, opts ...func(*inbox.WorkerConfig)) *nodeDownRig {
	t.Helper()
	ctx := t.Context()
	c, dsn := citustest.Private(t)
	r := &nodeDownRig{c: c, tenantOn: citustest.TenantOnEachWorker(t, c, "pginbox_receipts"), handled: map[string]int{},
		claimLog: countingHandler{n: new(atomic.Int64)}}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if r.client, err = inbox.NewClient(pool, inbox.Config{}); err != nil {
		t.Fatal(err)
	}
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: "orders", EventType: "order.created", SchemaVersion: 1},
		func(_ context.Context, m *handler.Msg) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.handled[m.Scope.ID]++
			return nil
		}); err != nil {
		t.Fatal(err)
	}
	cfg := inbox.WorkerConfig{
		Consumers: []string{"orders"}, PollInterval: poll,
		Logger: slog.New(r.claimLog),
	}
	for _, o := range opts {
		o(&cfg)
	}
	w, err := inbox.NewWorker(pool, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-done })
	return r
}

func (r *nodeDownRig) accept(ctx context.Context, tenant, id string) error {
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := r.client.Accept(actx, inbox.Message{
		Identity:  inbox.Identity{Scope: inbox.Tenant(tenant), Source: "shop", Consumer: "orders", MessageID: id},
		EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{},
	})
	return err
}

func (r *nodeDownRig) count(tenant string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handled[tenant]
}

// waitHandled waits up to 30s for n messages of tenant to be handled.
func (r *nodeDownRig) waitHandled(t *testing.T, tenant string, n int) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() bool { return r.count(tenant) >= n },
		"%s: %d messages handled; saw %v", tenant, n, testkit.Lazy(func() string { return fmt.Sprint(r.count(tenant)) }))
}

// With one Citus worker node stopped, the other node's tenants keep
// flowing: Accept of a tenant on the running node succeeds (the stopped
// node's fails), and a running worker still claims and handles the running
// node's messages although its discovery read (every shard) fails.
func TestCitusNodeDownOtherNodeFlows(t *testing.T) {
	ctx := t.Context()
	r := newNodeDownRig(t, 100*time.Millisecond)
	down, up := r.tenantOn[0], r.tenantOn[1]
	// Both nodes up: both tenants flow.
	for _, tenant := range r.tenantOn {
		if err := r.accept(ctx, tenant, "before"); err != nil {
			t.Fatal(err)
		}
		r.waitHandled(t, tenant, 1)
	}

	if err := r.c.Workers[0].Shutdown(pgcluster.ShutdownFast); err != nil {
		t.Fatal(err)
	}
	if err := r.accept(ctx, down, "during"); err == nil {
		t.Fatalf("accept of %s succeeded with its node stopped: was it stopped?", down)
	}
	for i := range 3 {
		if err := r.accept(ctx, up, fmt.Sprint("during-", i)); err != nil {
			t.Fatalf("accept of %s (its node running) with the other node stopped: %v", up, err)
		}
	}
	r.waitHandled(t, up, 4)

	if err := r.c.Workers[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.accept(ctx, down, "after"); err != nil {
		t.Fatal(err)
	}
	r.waitHandled(t, down, 2)
}

// With one worker node stopped, every tenant of the running node with due
// work drains during the outage, not only the few listed last: with 8
// tenants on each node and claims of 4 scopes, the rounds go round every
// scope listed before the outage (seen from outside: 3 of 8 such tenants
// applied nothing during a 15 s outage).
func TestCitusNodeDownEveryHealthyScopeDrains(t *testing.T) {
	ctx := t.Context()
	r := newNodeDownRig(t, 100*time.Millisecond, func(c *inbox.WorkerConfig) { c.ClaimBatch = 4 })
	each := citustest.TenantsOnEachWorker(t, r.c, "pginbox_receipts", 8)
	for _, tenants := range each {
		for _, tenant := range tenants {
			if err := r.accept(ctx, tenant, "before"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tenants := range each {
		for _, tenant := range tenants {
			r.waitHandled(t, tenant, 1)
		}
	}
	if err := r.c.Workers[0].Shutdown(pgcluster.ShutdownFast); err != nil {
		t.Fatal(err)
	}
	healthy := each[1]
	for i := range 3 {
		for _, tenant := range healthy {
			if err := r.accept(ctx, tenant, fmt.Sprint("during-", i)); err != nil {
				t.Fatalf("accept of %s (its node running) with the other node stopped: %v", tenant, err)
			}
		}
	}
	for _, tenant := range healthy {
		r.waitHandled(t, tenant, 4)
	}
}

// With one worker node stopped, every claim round reports an error (the
// discovery read needs every node) although it claims the running node's
// scopes. Such a round made progress: the worker must keep claiming on
// notifications, not wait for its poll as it does after a claim that got
// nothing. The poll is 3s here: four messages accepted one after another
// must all be handled within one poll interval.
func TestCitusNodeDownClaimsOnNotifications(t *testing.T) {
	const poll = 3 * time.Second
	ctx := t.Context()
	r := newNodeDownRig(t, poll)
	up := r.tenantOn[1]
	accept := func(id string) {
		t.Helper()
		if err := r.accept(ctx, up, id); err != nil {
			t.Fatalf("accept of %s (its node running): %v", up, err)
		}
	}
	accept("before") // discovery lists the scope while both nodes are up
	r.waitHandled(t, up, 1)

	if err := r.c.Workers[0].Shutdown(pgcluster.ShutdownFast); err != nil {
		t.Fatal(err)
	}
	// The rounds right after the shutdown may fail outright (the
	// coordinator's connections to the node break): those wait for the poll.
	accept("during-0")
	r.waitHandled(t, up, 2)
	// One at a time, each after the last was handled: each needs a claim
	// round of its own, which only its notification can start in time.
	start := time.Now()
	logged := r.claimLog.n.Load()
	for i := range 4 {
		accept(fmt.Sprint("during-", i+1))
		r.waitHandled(t, up, i+3)
	}
	took := time.Since(start)
	if took >= poll {
		t.Fatalf("4 messages took %s to be handled one after another, with the poll every %s: the claims waited for the poll, not for their notifications", took.Round(time.Millisecond), poll)
	}
	// Each of those rounds failed in part; the worker logs one such round
	// per poll interval, and the 4 took less than one.
	if n := r.claimLog.n.Load() - logged; n > 2 {
		t.Errorf("the worker logged %d claim failures in %s with the poll every %s: want one per poll interval, not one per round", n, took.Round(time.Millisecond), poll)
	}
}
