//go:build unix

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/examples/chain/services"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/childtest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
)

// EnvKills sets how many SIGKILLs TestChainSurvivesKills deals (default
// defaultKills, at least 10).
const EnvKills = "PGINBOX_CHAIN_KILLS"

const (
	defaultKills = 12
	envRole      = "PGINBOX_CHAIN_ROLE" // worker:<service> or relay:<service>
	envDSNPrefix = "PGINBOX_CHAIN_DSN_" // + service name
	// Short leases, so the claims of a killed process come back quickly.
	childWorkerLease = 500 * time.Millisecond
	childRelayLease  = time.Second
)

// roles are the five processes of the chain: a worker per service and a
// relay per service that emits.
var roles = []string{"worker:orders", "relay:orders", "worker:billing", "relay:billing", "worker:shipping"}

// TestChainChild is one process of the chain in TestChainSurvivesKills; run
// directly it skips.
func TestChainChild(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("only runs as a child process of TestChainSurvivesKills")
	}
	childtest.ExitWithParent()
	ctx := context.Background()
	kind, name, _ := strings.Cut(role, ":")
	pool := childPool(t, name)
	quiet := quietLogger()
	switch kind {
	case "worker":
		w, err := services.NewWorker(pool, name, inbox.WorkerConfig{Concurrency: 2, Lease: childWorkerLease, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
	case "relay":
		next := services.Next(name)
		client, err := services.NewInbox(childPool(t, next), next, inbox.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		r, err := services.NewRelay(pool, client, outbox.RelayConfig{BatchSize: 5, Lease: childRelayLease, PollInterval: 100 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown role %q", role)
	}
	childtest.Mark("running")
	select {} // until the parent kills us
}

func childPool(t *testing.T, service string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(os.Getenv(envDSNPrefix + service))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestChainSurvivesKills runs the chain as five processes (a worker per
// service, a relay per emitting service) while the storefront keeps placing
// orders, SIGKILLs a random process at a random moment again and again (a
// replacement starts each time), then lets the chain drain. Every order must
// have exactly one row in every service's business table, and nothing may be
// left pending or DEAD anywhere.
func TestChainSurvivesKills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kills := defaultKills
	if v := os.Getenv(EnvKills); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 {
			t.Fatalf("%s=%q: want a number of kills, at least 10", EnvKills, v)
		}
		kills = n
	}
	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, 0x636861696e))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kill schedule seed %d", seed)
		}
	})

	pools := map[string]*pgxpool.Pool{}
	env := []string{}
	for _, name := range services.Names {
		dsn := inboxtest.Database(t)
		env = append(env, envDSNPrefix+name+"="+dsn)
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		pools[name] = pool
	}
	storefront, err := services.NewInbox(pools[services.OrdersService], services.OrdersService, inbox.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	placed := 0
	place := func(n int) {
		for range n {
			placed++
			id := fmt.Sprintf("o-%d", placed)
			d := services.Delivery{Scope: inbox.Global(), Source: "storefront", MessageID: "evt-" + id}
			if _, err := services.AcceptOrderCreated(ctx, storefront, services.OrdersV1, d, services.OrderCreated{OrderID: id, TotalCents: int64(placed)}); err != nil {
				t.Fatal(err)
			}
		}
	}

	start := func(role string) *childtest.Child {
		c := childtest.Start(t, "TestChainChild", append([]string{envRole + "=" + role}, env...)...)
		if m := c.Marker(t); m != "running" {
			t.Fatalf("%s reported %q", role, m)
		}
		return c
	}
	place(40)
	children := map[string]*childtest.Child{}
	for _, role := range roles {
		children[role] = start(role)
	}
	killed := map[string]int{}
	var order []string
	for i := range kills {
		if i%len(roles) == 0 { // every process is killed in every round of kills, in a random order
			order = append([]string(nil), roles...)
			rnd.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		}
		role := order[i%len(roles)]
		place(10)
		// A random point of the work in flight: the kill's timing is the fault.
		time.Sleep(time.Duration(20+rnd.IntN(300)) * time.Millisecond)
		children[role].Kill(t)
		killed[role]++
		children[role] = start(role)
	}

	// Drain: the last processes run until every order is through and
	// nothing is left pending anywhere.
	if !testkit.Poll(2*time.Minute, func() bool { return drained(t, pools, placed) }) {
		for _, name := range services.Names {
			t.Logf("%s: %s", name, pending(t, pools[name]))
		}
		t.Fatalf("the chain did not drain within 2 minutes after %d kills", kills)
	}

	effects := map[string]int{}
	lost, doubled, rerun := 0, 0, 0
	for _, name := range services.Names {
		// Work a kill interrupted ran again: receipts and events past their
		// first attempt.
		var n int
		if err := pools[name].QueryRow(ctx, `SELECT (SELECT count(*) FROM pginbox_receipts WHERE attempts > 1)
			+ (SELECT count(*) FROM pginbox_outbox WHERE attempts > 1)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		rerun += n
		perOrder := map[string]int{}
		rows, err := pools[name].Query(ctx, "SELECT order_id, count(*) FROM "+services.Table(name)+" GROUP BY order_id")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				t.Fatal(err)
			}
			perOrder[id] = n
			effects[name] += n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= placed; i++ {
			switch n := perOrder[fmt.Sprintf("o-%d", i)]; {
			case n == 0:
				lost++
				t.Errorf("%s: order o-%d was never applied", name, i)
			case n > 1:
				doubled++
				t.Errorf("%s: order o-%d was applied %d times", name, i, n)
			}
		}
		if p := pending(t, pools[name]); p != "nothing pending" {
			t.Errorf("%s: %s", name, p)
		}
	}
	t.Logf("chain: %d events per service, %d kills %v, %d receipts and events run again after a kill; effects orders=%d billing=%d shipping=%d; lost %d; doubled %d",
		placed, kills, killed, rerun, effects[services.OrdersService], effects[services.BillingService], effects[services.ShippingService], lost, doubled)
}

// drained reports whether every order reached shipping and no receipt or
// outbox event is left unfinished in any service.
func drained(t *testing.T, pools map[string]*pgxpool.Pool, orders int) bool {
	t.Helper()
	var shipped int
	if err := pools[services.ShippingService].QueryRow(context.Background(), "SELECT count(DISTINCT order_id) FROM chain_shipments").Scan(&shipped); err != nil {
		t.Fatal(err)
	}
	if shipped < orders {
		return false
	}
	for _, name := range services.Names {
		if pending(t, pools[name]) != "nothing pending" {
			return false
		}
	}
	return true
}

// pending describes a service's unfinished receipts and outbox events.
func pending(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var receipts, events string
	err := pool.QueryRow(context.Background(), `SELECT
		coalesce((SELECT string_agg(status || ' ' || n, ', ') FROM (SELECT status, count(*) AS n FROM pginbox_receipts WHERE status <> 'COMPLETED' GROUP BY status) r), ''),
		coalesce((SELECT string_agg(status || ' ' || n, ', ') FROM (SELECT status, count(*) AS n FROM pginbox_outbox WHERE status <> 'PUBLISHED' GROUP BY status) o), '')`).Scan(&receipts, &events)
	if err != nil {
		t.Fatal(err)
	}
	if receipts == "" && events == "" {
		return "nothing pending"
	}
	return fmt.Sprintf("receipts: %s; outbox: %s", receipts, events)
}
