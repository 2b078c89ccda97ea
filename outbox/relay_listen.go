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
	return &service.Listener{Base: r.base, Pool: r.pool, Subscribe: outboxListen,
		Wake: r.wake, Retry: r.cfg.PollInterval, Subscribed: r.listening}
}

// outboxListen subscribes a session to Emit's wake-up notifications.
func outboxListen(ctx context.Context, conn *pgx.Conn) error {
	return db.New(conn).OutboxListen(ctx)
}

// listening runs the test hook of the same name, read when it runs: a test
// may set it after NewRelay.
func (r *Relay) listening() {
	if r.hooks.listening != nil {
		r.hooks.listening()
	}
}
