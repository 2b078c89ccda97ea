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
	"github.com/pginbox/pginbox/internal/testkit"
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

// The forged work row: tenant a, on the application role with only its own
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
		testkit.Eventually(t, 15*time.Second, func() bool {
			return td.allCount(t, "pginbox_work", "receipt_id = $1 AND status = 'PROCESSING'", victim) == 0 &&
				td.allCount(t, "pginbox_work", "receipt_id = $1 AND status = 'PENDING'", victim) == 0
		}, "the forged work row to be settled")
	}
	if st := stateOf(t, td.sys, victim); st.Status != "COMPLETED" {
		t.Errorf("tenant b's receipt is %s (last error %v), want COMPLETED", st.Status, deref(st.LastError))
	}
	refusedAsForeignKey(t, "forged work row", forged)
}

// Every other reference to a receipt is refused too when it crosses scopes:
// an outbox event linked to another tenant's receipt, an audit row about it
// or naming it as the replay, and a receipt claiming to replay it. The
// application role may append to its own audit trail but never change it.
func TestAppRoleCannotReferenceAnotherTenantsReceipt(t *testing.T) {
	t.Parallel()
	td := newTenancyDB(t)
	ids := acceptAll(t, newClient(t, td.app, inbox.Config{}),
		tenantMsg(inbox.Tenant("a"), "own"), tenantMsg(inbox.Tenant("b"), "victim"))
	own, victim := ids[0], ids[1]

	refusedAsForeignKey(t, "outbox event linked to b's receipt", td.asTenant(t, "a",
		`INSERT INTO pginbox_outbox (id, source, destination, event_type, schema_version, payload, receipt_id)
		 VALUES (gen_random_uuid(), 's', 'd', 'e', 1, '{}', $1)`, victim))
	refusedAsForeignKey(t, "audit row about b's receipt", td.asTenant(t, "a",
		`INSERT INTO pginbox_audit (receipt_id, scope_kind, scope_id, action, actor, reason, from_status, to_status, from_version, to_version)
		 VALUES ($1, 'tenant', 'a', 'requeue', 'x', 'x', 'DEAD', 'PENDING', 1, 2)`, victim))
	refusedAsForeignKey(t, "audit row naming b's receipt as the replay", td.asTenant(t, "a",
		`INSERT INTO pginbox_audit (receipt_id, scope_kind, scope_id, action, actor, reason, from_status, to_status, from_version, to_version, new_receipt_id)
		 VALUES ($1, 'tenant', 'a', 'replay', 'x', 'x', 'COMPLETED', 'COMPLETED', 1, 2, $2)`, own, victim))
	refusedAsForeignKey(t, "receipt replaying b's receipt", td.asTenant(t, "a",
		`INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, fingerprint, payload, replay_of)
		 SELECT gen_random_uuid(), 'tenant', 'a', 's', 'c', 'm', 'e', 1, '\x'::bytea || decode(repeat('00', 32), 'hex'), '{}', $1`, victim))

	// The same rows in a's own scope go in: the keys refuse only the crossing.
	if err := td.asTenant(t, "a", `INSERT INTO pginbox_outbox (id, source, destination, event_type, schema_version, payload, receipt_id)
		VALUES (gen_random_uuid(), 's', 'd', 'e', 1, '{}', $1)`, own); err != nil {
		t.Errorf("outbox event linked to a's own receipt: %v", err)
	}
	if err := td.asTenant(t, "a", `INSERT INTO pginbox_audit (receipt_id, scope_kind, scope_id, action, actor, reason, from_status, to_status, from_version, to_version)
		VALUES ($1, 'tenant', 'a', 'requeue', 'x', 'x', 'DEAD', 'PENDING', 1, 2)`, own); err != nil {
		t.Errorf("audit row about a's own receipt: %v", err)
	}
	for _, stmt := range []string{
		"UPDATE pginbox_audit SET reason = 'rewritten'",
		"DELETE FROM pginbox_audit",
		"TRUNCATE pginbox_audit",
	} {
		err := td.asTenant(t, "a", stmt)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s: err = %v, want permission denied (42501)", stmt, err)
		}
	}
	if n := td.allCount(t, "pginbox_audit", "reason = 'x'"); n != 1 {
		t.Errorf("%d audit rows, want a's one", n)
	}
}
