package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/service"
)

// listeners keep a LISTEN session open on the relay's pool's server and,
// with Nodes, on every Citus worker node, and wake the batch loop on every
// notification. Without them (PollOnly, or while a session is down) the
// batch loop still polls.
func (r *Relay) listeners() ([]*service.Listener, error) {
	pools := []*pgxpool.Pool{r.pool}
	if r.cfg.Nodes != nil {
		on, err := r.cfg.Nodes.Pools(r.pool)
		if err != nil {
			return nil, err
		}
		pools = append(pools, on...)
	}
	out := make([]*service.Listener, len(pools))
	for i, p := range pools {
		out[i] = &service.Listener{Base: r.base, Pool: p, Subscribe: outboxListen,
			Wake: r.wake, Retry: r.cfg.PollInterval, Subscribed: r.listening}
	}
	return out, nil
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
