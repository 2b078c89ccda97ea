package inbox

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/service"
)

// listener keeps a LISTEN session open and wakes the claimer on every
// notification for an owned consumer (its payload is the consumer). Without
// it (PollOnly, or while the session is down) the claimer still polls.
func (w *Worker) listener() *service.Listener {
	notify := func() {
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
	return &service.Listener{Base: w.base, Pool: w.sys, Subscribe: subscribe,
		Wake: w.wake, Notified: notified, Missed: notify, Retry: w.cfg.PollInterval}
}

// receiptListen subscribes a session to Accept's wake-up notifications.
func receiptListen(ctx context.Context, conn *pgx.Conn) error {
	return db.New(conn).ReceiptListen(ctx)
}
