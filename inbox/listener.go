package inbox

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/service"
)

// listener keeps a LISTEN session open and wakes the claimer on every
// notification for an owned consumer. Without it (PollOnly, or while the
// session is down) the claimer still polls.
func (w *Worker) listener() *service.Listener {
	return &service.Listener{
		Name: "worker",
		Log:  w.log,
		Pool: w.sys,
		Subscribe: func(ctx context.Context, conn *pgx.Conn) error {
			return db.New(conn).ReceiptListen(ctx)
		},
		Wants: func(consumer string) bool {
			if !w.ownedSet[consumer] {
				return false
			}
			w.notified.Store(true)
			return true
		},
		Wake:  w.wake,
		Retry: w.cfg.PollInterval,
	}
}
