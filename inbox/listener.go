package inbox

import (
	"context"
	"sync"
	"time"

	"github.com/pginbox/pginbox/db"
)

// listenLoop keeps a LISTEN session open and wakes the claimer on every
// notification for an owned consumer. Without it (PollOnly, or while the
// session is down) the claimer still polls.
func (w *Worker) listenLoop(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	for ctx.Err() == nil {
		err := w.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("pginbox worker: LISTEN connection lost, polling until it is back", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.cfg.PollInterval):
		}
	}
}

func (w *Worker) listen(ctx context.Context) error {
	pc, err := w.sys.Acquire(ctx)
	if err != nil {
		return err
	}
	// A listening session must not go back to the pool.
	conn := pc.Hijack()
	defer conn.Close(context.Background())
	if err := db.New(conn).ReceiptListen(ctx); err != nil {
		return err
	}
	signal(w.wake) // notifications sent while not listening were missed
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if w.ownedSet[n.Payload] {
			w.notified.Store(true)
			signal(w.wake)
		}
	}
}
