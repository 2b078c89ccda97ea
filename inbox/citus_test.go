package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/citustest"
)

// citusPool connects to a migrated Citus database with Citus logging every
// command it sends to the workers.
func citusPool(t *testing.T) (*pgxpool.Pool, *citustest.RemoteCommands) {
	t.Helper()
	return citustest.Pool(t, inboxtest.CitusDatabase(t))
}

// nodeOf returns the port of the worker holding the shard of value in table.
func nodeOf(t *testing.T, pool *pgxpool.Pool, table string, value any) int {
	t.Helper()
	return citustest.NodeOf(t, pool, table, value)
}

// On Citus, a handler that writes a business table colocated with
// pginbox's (distributed by the tenant, colocate_with pginbox_receipts)
// commits on one node: its business write and the receipt's completion go
// to the tenant's node, with a plain COMMIT and no two-phase commit (no
// PREPARE TRANSACTION sent, no record in pg_dist_transaction).
func TestCitusHandlerCommitsOnOneNode(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, rc := citusPool(t)
	_, err := pool.Exec(ctx, `
		CREATE TABLE orders (tenant_id text, order_id text, PRIMARY KEY (tenant_id, order_id));
		SELECT create_distributed_table('orders', 'tenant_id', colocate_with => 'pginbox_receipts');`)
	is.NoErr(err)

	reg := handler.NewRegistry()
	is.NoErr(reg.Register(handler.Key{Consumer: "orders", EventType: "order.created", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			_, err := m.Tx.Exec(ctx, "INSERT INTO orders (tenant_id, order_id) VALUES ($1, $2)", m.Scope.ID, m.MessageID)
			return err
		}))
	client, err := inbox.NewClient(pool, inbox.Config{})
	is.NoErr(err)
	tenants := []string{"tenant-a", "tenant-b", "tenant-c", "tenant-d"}
	for _, tenant := range tenants {
		for i := range 3 {
			_, err := client.Accept(ctx, inbox.Message{
				Identity: inbox.Identity{Scope: inbox.Tenant(tenant), Source: "shop", Consumer: "orders",
					MessageID: fmt.Sprint("o-", i)},
				EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{},
			})
			is.NoErr(err)
		}
	}
	// The coordinator's maintenance daemon deletes finished 2PC records at
	// any time, so the check is "no new gid", not a count; the remote
	// command log below is the complete proof.
	gids := func() map[string]bool {
		rows, err := pool.Query(ctx, "SELECT gid FROM pg_dist_transaction")
		is.NoErr(err)
		out := map[string]bool{}
		for rows.Next() {
			var gid string
			is.NoErr(rows.Scan(&gid))
			out[gid] = true
		}
		is.NoErr(rows.Err())
		return out
	}
	before := gids()
	rc.Reset() // create_distributed_table commits in two phases
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{"orders"}, Logger: slog.New(slog.DiscardHandler)})
	is.NoErr(err)
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 12)

	var orders, completed int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&orders))
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE status = 'COMPLETED'").Scan(&completed))
	is.Equal(orders, 12)
	is.Equal(completed, 12)
	for gid := range gids() {
		if !before[gid] {
			t.Errorf("two-phase commit recorded during the drain: %s", gid)
		}
	}
	is.Equal(len(rc.Matching("PREPARE TRANSACTION")), 0)       // none sent
	is.True(len(rc.Matching("INSERT INTO public.orders")) > 0) // the log did capture the handlers' writes
	// Each tenant's business write went to the node of its receipts.
	for _, tenant := range tenants {
		port := fmt.Sprintf("127.0.0.1:%d ", nodeOf(t, pool, "pginbox_receipts", tenant))
		for _, l := range rc.Matching("'" + tenant + "'") {
			if strings.Contains(l, "INSERT INTO public.orders") && !strings.Contains(l, port) {
				t.Errorf("%s's business write went to another node than its receipts (%s): %s", tenant, port, l)
			}
		}
	}
}

// A handler that writes a table not colocated with pginbox's (here one
// distributed by a bigint key, a row on the other node) still commits
// atomically: Citus runs a two-phase commit across the two nodes (PREPARE
// TRANSACTION on each, then COMMIT PREPARED). When the handler fails after
// that write, nothing of it commits, and its retry commits both.
func TestCitusHandlerNonColocatedWriteIsTwoPhase(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, rc := citusPool(t)
	_, err := pool.Exec(ctx, `
		CREATE TABLE ledger (id bigint PRIMARY KEY, tenant_id text NOT NULL);
		SELECT create_distributed_table('ledger', 'id');`)
	is.NoErr(err)
	const tenant = "tenant-a"
	home := nodeOf(t, pool, "pginbox_receipts", tenant)
	key := 0
	for k := 1; k < 1000 && key == 0; k++ {
		if nodeOf(t, pool, "ledger", k) != home {
			key = k
		}
	}
	is.True(key != 0) // a ledger row on the other node
	rc.Reset()        // create_distributed_table commits in two phases

	var attempts atomic.Int32
	reg := handler.NewRegistry()
	is.NoErr(reg.Register(handler.Key{Consumer: "ledger", EventType: "entry", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			if _, err := m.Tx.Exec(ctx, "INSERT INTO ledger (id, tenant_id) VALUES ($1, $2)", key, m.Scope.ID); err != nil {
				return err
			}
			if attempts.Add(1) == 1 {
				return errors.New("first attempt fails after its write")
			}
			return nil
		}))
	client, err := inbox.NewClient(pool, inbox.Config{})
	is.NoErr(err)
	_, err = client.Accept(ctx, inbox.Message{
		Identity:  inbox.Identity{Scope: inbox.Tenant(tenant), Source: "books", Consumer: "ledger", MessageID: "e-1"},
		EventType: "entry", SchemaVersion: 1, Payload: map[string]any{},
	})
	is.NoErr(err)
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Consumers: []string{"ledger"}, Logger: slog.New(slog.DiscardHandler),
		Backoff: func(int) time.Duration { return 0 },
	})
	is.NoErr(err)
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 2) // the failed attempt rolled back its ledger row, or the retry's insert would conflict

	var rows, completed int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM ledger").Scan(&rows))
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE status = 'COMPLETED'").Scan(&completed))
	is.Equal(rows, 1)
	is.Equal(completed, 1)
	prepared := rc.Matching("PREPARE TRANSACTION")
	is.True(len(prepared) >= 2)                       // one per node the transaction wrote
	is.True(len(rc.Matching("COMMIT PREPARED")) >= 2) // then committed on both
	ports := map[string]bool{}
	for _, l := range prepared {
		if _, node, ok := strings.Cut(l, "@127.0.0.1:"); ok {
			ports[strings.Fields(node)[0]] = true
		}
	}
	is.True(len(ports) >= 2) // on both workers
}

// On Citus a tenant's admin view requeues a DEAD receipt with statements
// routed to the tenant's node (ReceiptGetForUpdate, ReceiptRequeue,
// AuditInsert), and the worker then completes it.
func TestCitusRequeue(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := citusPool(t)
	var fail atomic.Bool
	fail.Store(true)
	reg := handler.NewRegistry()
	is.NoErr(reg.Register(handler.Key{Consumer: "c", EventType: "e", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			if fail.Load() {
				return handler.Permanent(errors.New("not yet"))
			}
			return nil
		}))
	client, err := inbox.NewClient(pool, inbox.Config{})
	is.NoErr(err)
	res, err := client.Accept(ctx, inbox.Message{
		Identity:  inbox.Identity{Scope: inbox.Tenant("tenant-q"), Source: "s", Consumer: "c", MessageID: "m"},
		EventType: "e", SchemaVersion: 1, Payload: map[string]any{},
	})
	is.NoErr(err)
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{"c"}, Logger: slog.New(slog.DiscardHandler)})
	is.NoErr(err)
	_, err = w.Drain(ctx)
	is.NoErr(err)

	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
	is.NoErr(err)
	view := admin.ForTenant("tenant-q")
	got, err := view.Get(ctx, res.ID)
	is.NoErr(err)
	is.Equal(got.Status, inbox.StatusDead)
	_, err = admin.ForTenant("tenant-other").Get(ctx, res.ID)
	is.True(err != nil) // another tenant's view does not find it
	_, err = view.Requeue(ctx, res.ID, inbox.ChangeParams{ExpectedVersion: got.Version, Actor: "ops", Reason: "fixed"})
	is.NoErr(err)
	fail.Store(false)
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 1)
	got, err = view.Get(ctx, res.ID)
	is.NoErr(err)
	is.Equal(got.Status, inbox.StatusCompleted)
	is.Equal(len(got.Audit), 1)
}
