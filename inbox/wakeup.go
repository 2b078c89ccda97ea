package inbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
)

// wakeupWindow bounds how often a Client notifies from inside an accept
// statement. A transaction that notifies holds a database-wide lock from
// pre-commit until its commit record is flushed, so notifying accepts commit one
// at a time and cannot share a disk flush. Within the window, accepts commit
// plain inserts and one notify follows them.
const wakeupWindow = 25 * time.Millisecond

// wakeups coalesces the NOTIFYs of one Client's accepts.
type wakeups struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	mu       sync.Mutex
	quietTil time.Time           // accepts started before this do not notify inline
	pending  map[string]struct{} // consumers of committed, not yet notified accepts
	flushing bool
	timer    *time.Timer    // the scheduled flush, while flushing
	timers   sync.WaitGroup // scheduled or running flushes
	closed   bool
}

func newWakeups(pool *pgxpool.Pool, log *slog.Logger) *wakeups {
	return &wakeups{pool: pool, log: log, pending: map[string]struct{}{}}
}

// inline reports whether an accept starting now notifies in its own statement:
// the first of each window does.
func (w *wakeups) inline() bool {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Before(w.quietTil) {
		return false
	}
	w.quietTil = now.Add(wakeupWindow)
	return true
}

// later notifies consumer's workers once the current window ends. Call it only
// after the accept committed, so a woken worker finds the receipt.
func (w *wakeups) later(consumer string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.pending[consumer] = struct{}{}
	if w.flushing {
		return
	}
	w.flushing = true
	w.timers.Add(1)
	w.timer = time.AfterFunc(max(time.Until(w.quietTil), 0), func() {
		defer w.timers.Done()
		w.flush()
	})
}

// close sends the pending wake-ups now and stops scheduling new ones, so no
// flush runs after the caller closes the pool.
func (w *wakeups) close() {
	w.mu.Lock()
	w.closed = true
	if w.timer != nil && w.timer.Stop() {
		w.timers.Done() // it will never run
	}
	w.mu.Unlock()
	w.flush()
	w.timers.Wait()
}

func (w *wakeups) flush() {
	w.mu.Lock()
	if len(w.pending) == 0 {
		w.flushing = false
		w.mu.Unlock()
		return
	}
	consumers := make([]string, 0, len(w.pending))
	for c := range w.pending {
		consumers = append(consumers, c)
	}
	clear(w.pending)
	w.flushing = false
	w.quietTil = time.Now().Add(wakeupWindow)
	w.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Workers also poll, so a lost wake-up only delays work by the poll interval.
	if err := db.New(w.pool).ReceiptNotify(ctx, consumers); err != nil {
		w.log.Warn("pginbox: waking workers failed; they will find the work at their next poll", "error", err)
	}
}
