package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Migrating under traffic (docs/UPGRADING.md). A migration that changes
// pginbox's tables needs their ACCESS EXCLUSIVE locks while workers and
// accepts keep using them, and their statements lock pginbox_receipts and
// pginbox_work in either order: an accept and a statement on a cached plan
// take pginbox_receipts first, a claim or ReceiptStart the server parses
// (the first on a connection, and every one after a migration committed)
// takes pginbox_work first. Any order a migration picks closes a cycle with
// one of them if it waits for a second lock while holding the first.
//
// So a migration that touches several of the tables starts by locking them
// all: it waits for pginbox_receipts alone, holding nothing, which lets the
// handler transactions ahead of it finish, and takes the others with NOWAIT.
// When one is busy the migration fails at once (SQLSTATE 55P03) and rolls
// back, and the Migrator runs it again a moment later. Every wait is bounded
// by lock_timeout, which the Migrator sets on its session, from
// lockWaitFirst doubling up to lockWaitMax: a migration queued behind a long
// transaction stalls the statements queued behind it for no longer than
// that. A deadlock (40P01) is retried the same way. After lockRetryBudget
// without progress, the Migrator gives up with ErrTablesBusy; the versions
// it applied stay applied.
const (
	lockWaitFirst   = 250 * time.Millisecond
	lockWaitMax     = 8 * time.Second
	lockRetryBudget = 5 * time.Minute
)

// LockRetry describes a migration that could not take its locks and gave
// way: the Migrator runs it again after a short pause.
type LockRetry struct {
	Version  int64         // the migration that gave way
	Attempts int           // how many times it gave way so far
	Err      error         // the lock timeout, busy table (SQLSTATE 55P03) or deadlock (40P01)
	Wait     time.Duration // how long the next attempt waits for a lock
}

// OnLockRetry sets fn to be called each time a migration gives way before
// the Migrator runs it again, for example to log it. Defaults to none.
func (m *Migrator) OnLockRetry(fn func(LockRetry)) { m.onRetry = fn }

// timeoutLocker is goose's session lock plus, on the same connection (the one
// goose runs the migrations on), the lock_timeout of the current attempt.
type timeoutLocker struct {
	lock.SessionLocker
	wait atomic.Int64 // a time.Duration
}

func (l *timeoutLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	if err := l.SessionLocker.SessionLock(ctx, conn); err != nil {
		return err
	}
	ms := max(time.Duration(l.wait.Load()).Milliseconds(), 1)
	if _, err := conn.ExecContext(ctx, "SELECT set_config('lock_timeout', $1, false)", fmt.Sprintf("%dms", ms)); err != nil {
		return errors.Join(fmt.Errorf("pginbox: setting lock_timeout: %w", err),
			l.SessionLocker.SessionUnlock(context.WithoutCancel(ctx), conn))
	}
	return nil
}

// SessionUnlock gives the connection back with its own lock_timeout.
func (l *timeoutLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, "RESET lock_timeout")
	return errors.Join(err, l.SessionLocker.SessionUnlock(ctx, conn))
}

// lockBusy reports a migration that failed for a lock it did not get.
func lockBusy(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01")
}

// retryLocks runs step (goose's UpTo or DownTo) until it succeeds or fails
// for another reason than a lock, and returns the versions it applied or
// rolled back over all attempts. again is the command that resumes.
func (m *Migrator) retryLocks(ctx context.Context, again string, step func() ([]*goose.MigrationResult, error)) ([]int64, error) {
	var done []int64
	wait, since, gaveWay := lockWaitFirst, time.Now(), 0
	for {
		m.locker.wait.Store(int64(wait))
		ran, err := versions(step())
		done = append(done, ran...)
		if err == nil || !lockBusy(err) {
			return done, err
		}
		if len(ran) > 0 { // progress: the next migration gets the whole budget
			wait, since, gaveWay = lockWaitFirst, time.Now(), 0
		}
		gaveWay++
		version := int64(0)
		var partial *goose.PartialError
		if errors.As(err, &partial) {
			version = partial.Failed.Source.Version
		}
		if time.Since(since) > m.budget {
			return done, fmt.Errorf("%w: migration %d gave way %d times in %v (last: %w); the migrations before it are done: run `%s` again",
				ErrTablesBusy, version, gaveWay, time.Since(since).Round(time.Second), err, again)
		}
		wait = min(2*wait, lockWaitMax)
		if m.onRetry != nil {
			m.onRetry(LockRetry{Version: version, Attempts: gaveWay, Err: err, Wait: wait})
		}
		// A short pause lets the statements that queued behind the attempt run.
		select {
		case <-ctx.Done():
			return done, fmt.Errorf("pginbox: migrating: %w (migration %d was waiting for its locks: %w)", ctx.Err(), version, err)
		case <-time.After(min(time.Duration(gaveWay)*50*time.Millisecond, time.Second)):
		}
	}
}
