package inbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// asTenant runs sql on the application role inside tenant's scope and
// returns the database's error.
func (td *tenancyDB) asTenant(t testing.TB, tenant, sql string, args ...any) error {
	t.Helper()
	return pgx.BeginFunc(context.Background(), td.app, func(tx pgx.Tx) error {
		if err := inbox.ApplyScope(context.Background(), tx, inbox.Tenant(tenant)); err != nil {
			return err
		}
		_, err := tx.Exec(context.Background(), sql, args...)
		return err
	})
}

// refusedAsForeignKey fails the test unless err is PostgreSQL's foreign-key
// violation (23503).
func refusedAsForeignKey(t testing.TB, what string, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23503" {
		t.Errorf("%s: err = %v, want a foreign-key violation (23503)", what, err)
	}
}

// The attack of issue 21: tenant a, on the application role with only its own
// scope set, queues a work row of its own scope for tenant b's COMPLETED
// receipt. The worker claims it, b's handler never runs, and when the lease
// expires recovery (system role) marks b's receipt DEAD. The database must
// refuse the forged row, so b's receipt stays COMPLETED.
func TestForgedWorkRowCannotDamageAnotherTenant(t *testing.T) {
	t.Parallel()
	td := newTenancyDB(t)
	ids := acceptAll(t, newClient(t, td.app, inbox.Config{}), tenantMsg(inbox.Tenant("b"), "victim"))
	victim := ids[0]
	reg := registry(t, func(context.Context, *handler.Msg) error { return nil })
	if n := inboxtest.Drain(t, newWorker(t, td.app, reg, inbox.WorkerConfig{SystemPool: td.sys})); n != 1 {
		t.Fatalf("drained %d, want 1", n)
	}

	forged := td.asTenant(t, "a", `INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts)
		VALUES ($1, 'tenant', 'a', 'orders.projection.v1', 1)`, victim)
	if forged == nil {
		// The row went in: let the worker and recovery do what they do with it.
		w := newWorker(t, td.app, reg, inbox.WorkerConfig{SystemPool: td.sys, Lease: 200 * time.Millisecond, RecoverInterval: 100 * time.Millisecond})
		startWorker(t, w)
		eventually(t, 15*time.Second, "the forged work row to be settled", func() bool {
			return td.allCount(t, "pginbox_work", "receipt_id = $1 AND status = 'PROCESSING'", victim) == 0 &&
				td.allCount(t, "pginbox_work", "receipt_id = $1 AND status = 'PENDING'", victim) == 0
		})
	}
	if st := stateOf(t, td.sys, victim); st.Status != "COMPLETED" {
		t.Errorf("tenant b's receipt is %s (last error %v), want COMPLETED", st.Status, deref(st.LastError))
	}
	refusedAsForeignKey(t, "forged work row", forged)
}
