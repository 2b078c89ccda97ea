package inbox_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/testkit"
)

// waitForLockWait returns once a session of pool's database waits for a row
// lock: the admin change has reached the row the open transaction holds.
func waitForLockWait(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	testkit.Eventually(t, 15*time.Second, func() bool {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}, "a session to wait for the held row lock")
}

// A requeue that a worker overtakes returns the documented sentinel errors:
// the transaction that took the receipt's work row (a claim, a completion)
// is held open on a real connection until the requeue waits for it, then
// commits. The requeue must see what it committed and refuse with
// ErrVersionConflict, not fail with "no rows in result set" or act on the
// state it read before.
func TestRequeueOvertakenByAWorker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// the worker's statements, in the transaction held open
		stmts []string
		want  string // the receipt's status afterwards
	}{
		{"claim", []string{
			`UPDATE pginbox_work SET status = 'PROCESSING', claim_token = gen_random_uuid(),
				lease_expires_at = now() + interval '1 minute', attempts = attempts + 1, version = version + 1
			 WHERE receipt_id = $1`,
		}, "PROCESSING"},
		{"completion", []string{
			`WITH done AS (DELETE FROM pginbox_work WHERE receipt_id = $1 RETURNING receipt_id, version)
			 UPDATE pginbox_receipts r SET status = 'COMPLETED', completed_at = now(), version = done.version + 1
			 FROM done WHERE r.id = done.receipt_id`,
		}, "COMPLETED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, _ := newPool(t)
			id := acceptAll(t, newClient(t, pool, inbox.Config{}), orderMsg("overtaken", raw(`{}`)))[0]
			inboxtest.SetState(t, pool, id, "status = 'RETRYABLE', attempts = 1, available_at = now()")
			admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			view := admin.ForTenant("tenant-a")
			r, err := view.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != inbox.StatusRetryable {
				t.Fatalf("status %s, want RETRYABLE", r.Status)
			}

			worker, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer worker.Rollback(ctx)
			for _, s := range tc.stmts {
				if _, err := worker.Exec(ctx, s, id); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() {
				_, err := view.Requeue(ctx, id, inbox.ChangeParams{ExpectedVersion: r.Version, Actor: "ops", Reason: "retry now"})
				done <- err
			}()
			waitForLockWait(t, pool)
			if err := worker.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			err = <-done
			var conflict *inbox.VersionConflictError
			if !errors.Is(err, inbox.ErrVersionConflict) || !errors.As(err, &conflict) || conflict.Current <= r.Version {
				t.Fatalf("Requeue = %v, want a *VersionConflictError with the worker's newer version", err)
			}
			if st := stateOf(t, pool, id); st.Status != tc.want {
				t.Errorf("status %s after the refused requeue, want %s", st.Status, tc.want)
			}
		})
	}
}

// killBefore ends the session that is about to run a statement whose SQL
// contains marker, from another connection, before the statement is sent.
type killBefore struct {
	marker string
	admin  *pgxpool.Pool
	killed atomic.Bool
}

func (k *killBefore) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, k.marker) && !k.killed.Swap(true) {
		// Waits up to 5 s for the session to be gone.
		k.admin.Exec(context.Background(), "SELECT pg_terminate_backend($1, 5000)", conn.PgConn().PID())
	}
	return ctx
}

func (k *killBefore) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A requeue of an expired claim whose connection is lost while it locks the
// receipt fails with that error: not a version conflict (with version 0),
// which the history check found when the lock's error was dropped.
func TestRequeueOfAnExpiredClaimLosingItsConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dsn := newPool(t)
	id := acceptAll(t, newClient(t, pool, inbox.Config{}), orderMsg("expired-claim", raw(`{}`)))[0]
	inboxtest.SetState(t, pool, id, "status = 'PROCESSING', lease_expires_at = now() - interval '1 second'")
	kill := &killBefore{marker: "ReceiptGetForUpdateNoWait", admin: pool}
	traced := poolFor(t, dsn, func(c *pgxpool.Config) { c.ConnConfig.Tracer = kill })
	admin, err := inbox.NewAdmin(traced, inbox.AdminConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	view := admin.ForTenant("tenant-a")
	before := stateOf(t, pool, id)
	_, err = view.Requeue(ctx, id, inbox.ChangeParams{ExpectedVersion: int64(before.Version), Actor: "ops", Reason: "worker gone"})
	if !kill.killed.Load() {
		t.Fatal("the requeue never locked the expired claim: the test proved nothing")
	}
	if err == nil || errors.Is(err, inbox.ErrVersionConflict) || errors.Is(err, inbox.ErrWrongState) {
		t.Fatalf("Requeue with its connection lost = %v, want the connection's error", err)
	}
	if after := stateOf(t, pool, id); after.Status != "PROCESSING" || after.Version != before.Version {
		t.Errorf("receipt %s v%d after the failed requeue, want PROCESSING v%d", after.Status, after.Version, before.Version)
	}
}
