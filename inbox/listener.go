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
	notified := func(consumer string) {
		if w.ownedSet[consumer] {
			w.notified.Store(true)
			service.Signal(w.wake)
		}
	}
	return &service.Listener{Base: w.base, Pool: w.sys, Subscribe: receiptListen,
		Wake: w.wake, Notified: notified, Retry: w.cfg.PollInterval}
}

// receiptListen subscribes a session to Accept's wake-up notifications.
func receiptListen(ctx context.Context, conn *pgx.Conn) error {
	return db.New(conn).ReceiptListen(ctx)
}
