package inbox

import (
	"context"
	"log/slog"
	"slices"
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

// wakeupEarlyScopes is how many wake-ups a window may send right after an
// accept's commit instead of at its end: one for each accept of a quiet scope
// (no accept of it in the last wakeupWindow). So a busy tenant's accepts,
// which open every window, do not make a quiet tenant's message wait for the
// window's end; sent apart from the accepts, these wake-ups keep the accepts'
// commits free of the notify lock, and the cap bounds them when many tenants
// accept at once.
const wakeupEarlyScopes = 4

// wakeups coalesces the NOTIFYs of one Client's accepts.
type wakeups struct {
	log *slog.Logger
	// send is ReceiptNotify on node (-1: the pool's server); tests record
	// instead.
	send func(ctx context.Context, node int, consumers []string) error
	// nodeOf is the Citus worker node of a scope's accepts (Nodes), -1
	// without Nodes: the workers there tell its wake-ups from the others'.
	nodeOf func(Scope) int
	now    func() time.Time // time.Now; tests set their own clock

	mu       sync.Mutex
	quietTil time.Time               // the current window's end
	lastSeen map[Scope]time.Time     // when each recently active scope last accepted
	early    int                     // early wake-ups of the window
	pending  map[wakeTarget]struct{} // consumers of committed, not yet notified accepts, and where
	flushing bool
	soon     bool           // the scheduled flush is an early one
	timer    *time.Timer    // the scheduled flush, while flushing
	timers   sync.WaitGroup // scheduled or running flushes
	closed   bool
}

// wakeTarget is a consumer to wake, and the Citus worker node whose
// accepts it is woken for (-1: the pool's server).
type wakeTarget struct {
	node     int
	consumer string
}

// newWakeups sends the wake-ups on pool, or with nodes on the node of the
// accepts they are for: the workers there then know where to claim.
func newWakeups(pool *pgxpool.Pool, nodes *Nodes, log *slog.Logger) *wakeups {
	w := &wakeups{log: log, now: time.Now, lastSeen: map[Scope]time.Time{}, pending: map[wakeTarget]struct{}{},
		nodeOf: func(Scope) int { return -1 },
		send: func(ctx context.Context, _ int, consumers []string) error {
			return db.New(pool).ReceiptNotify(ctx, consumers)
		}}
	if nodes != nil {
		w.nodeOf = func(s Scope) int {
			// Known: the accept just looked its scope's node up.
			i, err := nodes.n.Of(context.Background(), s)
			if err != nil {
				return -1
			}
			return i
		}
		w.send = func(ctx context.Context, node int, consumers []string) error {
			return nodes.notify(ctx, pool, node, consumers)
		}
	}
	return w
}

// inline reports whether an accept of scopes starting now notifies in its own
// statement: the first of each window does.
func (w *wakeups) inline(scopes ...Scope) bool {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Before(w.quietTil) {
		return false
	}
	w.newWindow(now)
	w.saw(scopes, now)
	return true
}

// later notifies the workers of consumers of a committed accept (or batch) of
// scopes: right away if a scope was quiet (one early wake-up for the call, up
// to wakeupEarlyScopes a window), otherwise once the window ends. Call it only
// after the accept committed, so a woken worker finds the receipt.
func (w *wakeups) later(consumers []string, scopes []Scope) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	for _, s := range scopes {
		node := w.nodeOf(s)
		for _, c := range consumers {
			w.pending[wakeTarget{node, c}] = struct{}{}
		}
	}
	now := w.now()
	quiet := w.anyQuiet(scopes, now)
	w.saw(scopes, now)
	if quiet && w.early < wakeupEarlyScopes {
		w.early++
		w.soon = true
		if w.flushing && w.timer.Stop() {
			w.timer.Reset(0) // the flush scheduled for the window's end runs now
		}
	}
	if w.flushing {
		return
	}
	delay := max(w.quietTil.Sub(now), 0)
	if w.soon {
		delay = 0
	}
	w.flushing = true
	w.timers.Add(1)
	w.timer = time.AfterFunc(delay, func() {
		defer w.timers.Done()
		w.flush()
	})
}

// anyQuiet reports whether a scope of scopes had no accept in the last
// wakeupWindow. w.mu is held.
func (w *wakeups) anyQuiet(scopes []Scope, now time.Time) bool {
	for _, s := range scopes {
		if last, ok := w.lastSeen[s]; !ok || now.Sub(last) >= wakeupWindow {
			return true
		}
	}
	return false
}

// saw notes accepts of scopes at now. w.mu is held.
func (w *wakeups) saw(scopes []Scope, now time.Time) {
	for _, s := range scopes {
		w.lastSeen[s] = now
	}
}

// newWindow starts a window at now and forgets the scopes that went quiet.
// w.mu is held.
func (w *wakeups) newWindow(now time.Time) {
	w.quietTil = now.Add(wakeupWindow)
	w.early = 0
	for s, last := range w.lastSeen {
		if now.Sub(last) >= wakeupWindow {
			delete(w.lastSeen, s)
		}
	}
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
		w.flushing, w.soon = false, false
		w.mu.Unlock()
		return
	}
	byNode := map[int][]string{}
	for t := range w.pending {
		byNode[t.node] = append(byNode[t.node], t.consumer)
	}
	clear(w.pending)
	w.flushing = false
	if !w.soon {
		// The window's last wake-up opens the next window, so no accept
		// notifies inline right after it.
		w.newWindow(w.now())
	}
	w.soon = false
	w.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Workers also poll, so a lost wake-up only delays work by the poll interval.
	for node, consumers := range byNode {
		slices.Sort(consumers)
		if err := w.send(ctx, node, consumers); err != nil {
			w.log.Warn("pginbox: waking workers failed; they will find the work at their next poll", "error", err)
		}
	}
}
