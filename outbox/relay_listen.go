package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/service"
)

// listener keeps a LISTEN session open and wakes the batch loop on every
// notification. Without it (PollOnly, or while the session is down) the
// batch loop still polls.
func (r *Relay) listener() *service.Listener {
	return &service.Listener{
		Name: "relay",
		Log:  r.log,
		Pool: r.pool,
		Subscribe: func(ctx context.Context, conn *pgx.Conn) error {
			return db.New(conn).OutboxListen(ctx)
		},
		Wake:  r.wake,
		Retry: r.cfg.PollInterval,
		Subscribed: func() {
			if r.hooks.listening != nil {
				r.hooks.listening()
			}
		},
	}
}
