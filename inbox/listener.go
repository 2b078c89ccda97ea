package inbox

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/service"
)

// listeners are the worker's LISTEN sessions: one on its SystemPool's
// server and, with Nodes, one on every worker node, where the accepts of
// clients with Nodes send their wake-ups.
func (w *Worker) listeners() ([]*service.Listener, error) {
	out := []*service.Listener{w.listener(w.sys, func() { w.woke(-1) })}
	if w.nodes == nil {
		return out, nil
	}
	for i := range w.nodes.Count() {
		pool, err := w.nodes.n.Pool(w.sys, i)
		if err != nil {
			return nil, err
		}
		out = append(out, w.listener(pool, func() { w.woke(i) }))
	}
	return out, nil
}

// listener keeps a LISTEN session open on pool and wakes the claimer on
// every notification for an owned consumer (its payload is the consumer),
// after woke (which marks where the work is). Without it (PollOnly, or
// while the session is down) the claimer still polls.
func (w *Worker) listener(pool *pgxpool.Pool, woke func()) *service.Listener {
	notify := func() {
		woke()
		w.notified.Store(true)
		service.Signal(w.wake)
	}
	notified := func(consumer string) {
		if w.ownedSet[consumer] {
			notify()
		}
	}
	subscribe := receiptListen
	if w.hooks.beforeListen != nil {
		subscribe = func(ctx context.Context, conn *pgx.Conn) error {
			w.hooks.beforeListen()
			return receiptListen(ctx, conn)
		}
	}
	return &service.Listener{Base: w.base, Pool: pool, Subscribe: subscribe,
		Wake: w.wake, Notified: notified, Missed: notify, Retry: w.cfg.PollInterval}
}

// receiptListen subscribes a session to Accept's wake-up notifications.
func receiptListen(ctx context.Context, conn *pgx.Conn) error {
	return db.New(conn).ReceiptListen(ctx)
}
