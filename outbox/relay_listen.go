package outbox

import (
	"context"
	"sync"
	"time"

	"github.com/pginbox/pginbox/db"
)

// listenLoop keeps a LISTEN session open and wakes the batch loop on every
// notification. Without it (PollOnly, or while the session is down) the
// batch loop still polls.
func (r *Relay) listenLoop(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	for ctx.Err() == nil {
		err := r.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("pginbox relay: LISTEN connection lost, polling until it is back", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.cfg.PollInterval):
		}
	}
}

func (r *Relay) listen(ctx context.Context) error {
	pc, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A listening session must not go back to the pool.
	conn := pc.Hijack()
	defer conn.Close(context.Background())
	if err := db.New(conn).OutboxListen(ctx); err != nil {
		return err
	}
	signal(r.wake) // notifications sent while not listening were missed
	if r.hooks.listening != nil {
		r.hooks.listening()
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		signal(r.wake)
	}
}
