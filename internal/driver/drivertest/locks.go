package drivertest

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/driver"
)

// advisoryWaits counts the sessions of the current database waiting for an
// advisory lock.
const advisoryWaits = `SELECT count(*) FROM pg_locks
	WHERE locktype = 'advisory' AND NOT granted
	  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// lockWaiters counts the sessions of the case's database waiting for an
// advisory lock, on every node: on Citus a key's lock is taken on the node
// of its scope.
func (e *env) lockWaiters() int {
	e.Helper()
	n := e.count(advisoryWaits)
	var citus bool
	e.must(e.pool.QueryRow(e.ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&citus), "probing for Citus")
	if citus {
		n += e.count("SELECT coalesce(sum(result::int), 0)::int FROM run_command_on_workers($1) WHERE success", advisoryWaits)
	}
	return n
}

// waitsForLock runs waiter in a goroutine while the case holds a lock,
// and fails the case unless waiter comes to wait for an advisory lock
// before it returns. Then it runs release, which ends the holder's
// transaction, and returns waiter's error once waiter returned.
func (e *env) waitsForLock(what string, waiter func(ctx context.Context) error, release func()) error {
	e.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- waiter(ctx) }()
	for e.lockWaiters() == 0 {
		select {
		case err := <-done:
			e.Fatalf("%s did not wait for the key's lock (it returned %v)", what, err)
		case <-ctx.Done():
			e.Fatalf("%s: neither returned nor waited for a lock in a minute", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
	release()
	return <-done
}

// An ordering key's accept and its promotion decide under the key's lock,
// taken where the key's rows are: a keyed accept waits for a transaction
// that holds the key's promotion, and a promotion waits for a caller's
// transaction that accepted a message of the key.
func acceptKeyLock(e *env) {
	k1 := keyed(draft(tenantA, consumer, "k1"), "K")
	holder := e.begin(e.pool)
	_, _, err := e.drv.EnsureScope(e.ctx, holder, tenantA)
	e.must(err, "EnsureScope")
	e.promote(holder, tenantA, []string{consumer}, []string{"K"})
	err = e.waitsForLock("a keyed accept behind a transaction holding the key's promotion", func(ctx context.Context) error {
		conn, err := e.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		_, err = e.drv.Accept(ctx, &driver.AcceptPlan{Conn: conn, Groups: plan(k1), Wake: func() bool { return true }})
		return err
	}, func() { e.must(holder.Commit(e.ctx), "commit") })
	e.must(err, "the keyed accept")
	e.wantStatus(k1.ID, "PENDING")

	// The other way: a caller's transaction accepted k2 behind k1.
	k2 := keyed(draft(tenantA, consumer, "k2"), "K")
	holder = e.begin(e.pool)
	_, _, err = e.drv.EnsureScope(e.ctx, holder, tenantA)
	e.must(err, "EnsureScope")
	_, err = e.drv.Accept(e.ctx, &driver.AcceptPlan{Tx: holder, Groups: plan(k2)})
	e.must(err, "a keyed accept in the caller's transaction")
	err = e.waitsForLock("a promotion behind a transaction that accepted a message of the key", func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			if err := e.drv.SetScope(ctx, tx, driver.ScopeParams(tenantA)); err != nil {
				return err
			}
			b := &pgx.Batch{}
			e.drv.QueuePromotion(ctx, b, tenantA, []string{consumer}, []string{"K"},
				[]string{driver.KeyLockName(consumer, tenantA, "K")})
			return tx.SendBatch(ctx, b).Close()
		})
	}, func() { e.must(holder.Commit(e.ctx), "commit") })
	e.must(err, "the promotion")
	e.wantStatus(k2.ID, "BLOCKED")
}

// Emits of one key (in one scope) serialize on the key's lock, so a key's
// events are numbered in commit order.
func outboxKeyLock(e *env) {
	first, second := eventParams("K"), eventParams("K")
	holder := e.begin(e.pool)
	e.must(e.drv.SetScope(e.ctx, holder, driver.ScopeParams(tenantA)), "SetScope")
	e.must(e.drv.Outbox().Insert(e.ctx, db.New(holder), first), "Insert")
	err := e.waitsForLock("an emit of a key another open transaction emitted for", func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			if err := e.drv.SetScope(ctx, tx, driver.ScopeParams(tenantA)); err != nil {
				return err
			}
			return e.drv.Outbox().Insert(ctx, db.New(tx), second)
		})
	}, func() { e.must(holder.Commit(e.ctx), "commit") })
	e.must(err, "the second emit")
	scopeOf.Store(first.ID, "tenant-a")
	scopeOf.Store(second.ID, "tenant-a")
	if a, b := e.event(first.ID).Seq, e.event(second.ID).Seq; a >= b {
		e.Fatalf("the key's events committed in one order were numbered %d, %d", a, b)
	}
}
