package inbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/internal/driver"
)

// promotion queues what makes the next receipt of every ordering key among
// jobs due, to run in their handler transaction's commit round trip
// (connTx.commitAfter), or returns nil when no job has a key. ReceiptStart
// removed their work rows; under the keys' locks (ReceiptKeyLock) the
// promotion sees every receipt an accept of the key committed, and an
// accept that waits for the lock sees this transaction's removal once it
// commits. The locks are taken only then, after the handlers ran, and held
// for the commit alone, so an accept of the key never waits for a handler.
// The worker's own claim loop is woken after the commit (commit), not every
// worker through NOTIFY: a NOTIFY per handler transaction would serialize
// the commits (the server takes one lock for every notifying commit), and
// any worker's next claim finds the promoted receipt.
func promotion(ctx context.Context, drv driver.Driver, jobs []*job) *pgx.Batch {
	var consumers, keys, locks []string
	for _, j := range jobs {
		if j.orderingKey == "" {
			continue
		}
		c := j.l.r.Identity.Consumer
		consumers = append(consumers, c)
		keys = append(keys, j.orderingKey)
		locks = append(locks, driver.KeyLockName(c, j.l.r.Identity.Scope, j.orderingKey))
	}
	if len(keys) == 0 {
		return nil
	}
	// The jobs of one transaction share a scope (execute groups them).
	b := &pgx.Batch{}
	drv.QueuePromotion(ctx, b, jobs[0].l.r.Identity.Scope, consumers, keys, locks)
	return b
}

// promoteKeys locks the keys and promotes their next receipts in one round
// trip, returning the consumers of the promoted receipts.
func promoteKeys(ctx context.Context, drv driver.Driver, tx pgx.Tx, s Scope, consumers, keys, locks []string) ([]string, error) {
	b := &pgx.Batch{}
	drv.QueuePromotion(ctx, b, s, consumers, keys, locks)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for range b.Len() - 1 { // the locks, and what comes before them
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("locking the ordering keys: %w", err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("promoting the next receipts of the ordering keys: %w", err)
	}
	woken, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("promoting the next receipts of the ordering keys: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("promoting the next receipts of the ordering keys: %w", err)
	}
	return woken, nil
}
