package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/schema"
)

// The worker under the prescribed roles: claims, heartbeats and recovery on
// the system pool, every handler transaction on the application role with the
// receipt's scope applied. A handler's write into its own tenant's business
// rows commits with the completion; one into another tenant's rows is refused
// by the application's policy. Receipts of several scopes taken by one slot
// run in one transaction per scope. Failures and retries are recorded.
func TestWorkerUnderAppRoleWithSystemPool(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	td := newTenancyDB(t)
	c := newClient(t, td.app, inbox.Config{})
	a, b, g := inbox.Tenant("a"), inbox.Tenant("b"), inbox.Global()
	ids := acceptAll(t, c,
		tenantMsg(a, "own-1"), tenantMsg(b, "own-2"), tenantMsg(g, "global-1"), tenantMsg(a, "own-3"),
		tenantMsg(a, "cross"), tenantMsg(b, "flaky"))
	cross, flaky := ids[4], ids[5]

	var mu sync.Mutex
	seen := map[string]string{} // message ID -> the tenant setting its handler saw
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		var tenant string
		if err := m.Tx.QueryRow(ctx, "SELECT coalesce(current_setting('pginbox.tenant', true), '')").Scan(&tenant); err != nil {
			return err
		}
		mu.Lock()
		seen[m.MessageID] = tenant
		mu.Unlock()
		if m.Scope.Kind == inbox.ScopeGlobal {
			return nil
		}
		owner := m.Scope.ID
		if m.MessageID == "cross" {
			owner = "b" // a handler of tenant a writing b's rows
		}
		if _, err := m.Tx.Exec(ctx, "INSERT INTO tenant_orders (tenant_id, order_id) VALUES ($1, $2)", owner, m.MessageID); err != nil {
			return handler.Permanent(err)
		}
		if _, err := outbox.Emit(ctx, m.Tx, outbox.Event{Type: "order.projected", SchemaVersion: 1, Payload: raw(`{}`), Source: "s", Destination: "d"}); err != nil {
			return err
		}
		if m.MessageID == "flaky" && m.Attempt == 1 {
			return fmt.Errorf("transient")
		}
		return nil
	})
	w := newWorker(t, td.app, reg, inbox.WorkerConfig{
		SystemPool:    td.sys,
		Concurrency:   1,
		MessagesPerTx: 10, // one slot takes receipts of several scopes at once
		Backoff:       func(int) time.Duration { return 10 * time.Millisecond },
	})
	startWorker(t, w)

	for _, id := range ids {
		if id == cross {
			continue
		}
		waitStatus(t, td.sys, id, "COMPLETED", 15*time.Second)
	}
	st := waitStatus(t, td.sys, cross, "DEAD", 15*time.Second)
	is.True(st.LastError != nil && strings.Contains(*st.LastError, "row-level security")) // refused by the application's policy
	st = stateOf(t, td.sys, flaky)
	is.Equal(st.Attempts, 2) // failed once (recorded under b's scope), then completed

	mu.Lock()
	is.Equal(seen["own-1"], "a")
	is.Equal(seen["own-2"], "b")
	is.Equal(seen["global-1"], "")
	is.Equal(seen["cross"], "a")
	mu.Unlock()

	// Business rows as the owner (a superuser sees every row): each tenant's
	// own writes committed with their completions, the cross write did not.
	var rows []string
	r, err := td.owner.Query(ctx, "SELECT tenant_id || '/' || order_id FROM tenant_orders ORDER BY 1")
	is.NoErr(err)
	for r.Next() {
		var s string
		is.NoErr(r.Scan(&s))
		rows = append(rows, s)
	}
	is.NoErr(r.Err())
	is.Equal(strings.Join(rows, " "), "a/own-1 a/own-3 b/flaky b/own-2")
	// Events emitted in a handler's transaction carry its tenant.
	is.Equal(td.allCount(t, "pginbox_outbox", "scope_kind = 'tenant' AND scope_id = 'a'"), 2)
	is.Equal(td.allCount(t, "pginbox_outbox", "scope_kind = 'tenant' AND scope_id = 'b'"), 2)
	is.Equal(td.allCount(t, "pginbox_outbox", "scope_kind = 'global'"), 0)
}

// Lease recovery runs across tenants on the system pool; the recovered
// receipts complete under the application role.
func TestRecoveryUnderAppRoleWithSystemPool(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	td := newTenancyDB(t)
	ids := acceptAll(t, newClient(t, td.app, inbox.Config{}), tenantMsg(inbox.Tenant("a"), "one"), tenantMsg(inbox.Tenant("b"), "two"))
	for _, id := range ids {
		inboxtest.SetState(t, td.owner, id, "status = 'PROCESSING', lease_expires_at = now() - interval '1 second', attempts = 1")
	}
	startWorker(t, newWorker(t, td.app, registry(t, func(context.Context, *handler.Msg) error { return nil }),
		inbox.WorkerConfig{SystemPool: td.sys, Lease: time.Second}))
	for _, id := range ids {
		st := waitStatus(t, td.sys, id, "COMPLETED", 15*time.Second)
		is.Equal(st.Attempts, 2)
	}
}

// SystemPool holds the listener and the bookkeeping: NewWorker refuses one
// too small for them.
func TestWorkerSystemPoolSize(t *testing.T) {
	t.Parallel()
	pool, dsn := newPool(t)
	small := poolFor(t, dsn, func(c *pgxpool.Config) { c.MaxConns = 1 })
	_, err := inbox.NewWorker(pool, registry(t, func(context.Context, *handler.Msg) error { return nil }), inbox.WorkerConfig{SystemPool: small})
	requireConfigError(t, err, "WorkerConfig.SystemPool")
	if !strings.Contains(err.Error(), "MaxConns 1") {
		t.Fatalf("err = %v, want SystemPool's size refused", err)
	}
}

// A worker whose SystemPool row-level security holds to one scope would claim
// nothing and look idle: Start refuses it and says which role to use.
func TestWorkerStartRefusesRestrictedSystemPool(t *testing.T) {
	t.Parallel()
	td := newTenancyDB(t)
	w, err := inbox.NewWorker(td.app, registry(t, func(context.Context, *handler.Msg) error { return nil }), inbox.WorkerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Start(context.Background())
	if !errors.Is(err, inbox.ErrTenancyRestricted) || !strings.Contains(err.Error(), "WorkerConfig.SystemPool") {
		t.Fatalf("Start = %v, want ErrTenancyRestricted naming WorkerConfig.SystemPool", err)
	}

	w, err = inbox.NewWorker(td.app, registry(t, func(context.Context, *handler.Msg) error { return nil }), inbox.WorkerConfig{SystemPool: td.sys})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatalf("Start with a BYPASSRLS SystemPool = %v", err)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Tenancy enabled under a running worker whose SystemPool role it now
// restricts: the claims find nothing, and the worker says so (an
// EventRestricted carrying ErrTenancyRestricted, and an error log line)
// instead of idling in silence; it logs again once the restriction is gone.
func TestRunningWorkerReportsANewRestriction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	td := newTenancyDB(t)
	if err := schema.DisableTenancy(ctx, td.owner); err != nil {
		t.Fatal(err)
	}
	logger, logs := newLogRecorder(t)
	w := newWorker(t, td.app, registry(t, func(context.Context, *handler.Msg) error { return nil }),
		inbox.WorkerConfig{PollInterval: 100 * time.Millisecond, Logger: logger})
	sub := w.Subscribe(inbox.SubscribeConfig{Kinds: []inbox.EventKind{inbox.EventRestricted}})
	defer sub.Close()
	startWorker(t, w)
	id := acceptAll(t, newClient(t, td.app, inbox.Config{}), tenantMsg(inbox.Tenant("a"), "before"))[0]
	waitStatus(t, td.owner, id, "COMPLETED", 15*time.Second)
	if n := len(sub.C()); n != 0 {
		t.Fatalf("%d restriction events while unrestricted", n)
	}

	if err := schema.EnableTenancy(ctx, td.owner); err != nil {
		t.Fatal(err)
	}
	e := testkit.WaitFor(t, sub.C(), 30*time.Second, "EventRestricted after tenancy was enabled under the worker")
	if !errors.Is(e.Err, inbox.ErrTenancyRestricted) || !strings.Contains(e.Err.Error(), "WorkerConfig.SystemPool") {
		t.Errorf("event error = %v, want ErrTenancyRestricted naming WorkerConfig.SystemPool", e.Err)
	}
	if !logs.logged("claims find nothing because row-level security now restricts the SystemPool's role") {
		t.Error("no error logged")
	}

	if err := schema.DisableTenancy(ctx, td.owner); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		return logs.logged("row-level security no longer restricts the SystemPool's role")
	}, "the end of the restriction to be logged")
}

// An operator turns tenancy on and off while workers claim and clients
// accept: each switch takes its table locks among transactions that lock the
// same tables in other orders, and it must not fail with a deadlock.
func TestTenancySwitchUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	td := newTenancyDB(t)
	w := newWorker(t, td.app, registry(t, func(context.Context, *handler.Msg) error { return nil }),
		inbox.WorkerConfig{SystemPool: td.sys, Concurrency: 4, PollInterval: 10 * time.Millisecond})
	startWorker(t, w)
	c := newClient(t, td.app, inbox.Config{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = c.AcceptBatch(ctx, []inbox.Message{tenantMsg(inbox.Tenant(fmt.Sprint("t", i%3)), fmt.Sprintf("load-%d-%d", g, i))})
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 20 {
		var err error
		if i%2 == 0 {
			err = schema.DisableTenancy(ctx, td.owner)
		} else {
			err = schema.EnableTenancy(ctx, td.owner)
		}
		if err != nil {
			t.Fatalf("switch %d: %v", i, err)
		}
	}
}
