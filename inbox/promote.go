package inbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
)

// promote makes the next receipt of every ordering key among jobs due, in
// their handler transaction right before it commits. ReceiptStart removed
// their work rows; under the keys' locks (ReceiptKeyLock) the promotion sees
// every receipt an accept of the key committed, and an accept that waits for
// the lock sees this transaction's removal once it commits. The locks are
// taken only now, after the handlers ran, so an accept of the key never
// waits for a handler. Jobs without a key cost nothing.
func (w *Worker) promote(ctx context.Context, tx pgx.Tx, jobs []*job) error {
	var consumers, keys, locks []string
	for _, j := range jobs {
		if j.orderingKey == "" {
			continue
		}
		c := j.l.r.Identity.Consumer
		consumers = append(consumers, c)
		keys = append(keys, j.orderingKey)
		locks = append(locks, keyLockName(c, j.l.r.Identity.Scope, j.orderingKey))
	}
	if len(keys) == 0 {
		return nil
	}
	// The jobs of one transaction share a scope (execute groups them).
	s := jobs[0].l.r.Identity.Scope
	woken, err := promoteKeys(ctx, tx, s, consumers, keys, locks)
	if err != nil {
		return err
	}
	if len(woken) > 0 {
		// At commit, like accept's wake-up.
		if err := db.New(tx).ReceiptNotify(ctx, woken); err != nil {
			return fmt.Errorf("waking the workers of the promoted receipts: %w", err)
		}
	}
	return nil
}

// promoteKeys locks the keys and promotes their next receipts in one round
// trip (the promotion runs after the lock is granted, with a snapshot taken
// then), returning the consumers of the promoted receipts.
func promoteKeys(ctx context.Context, tx pgx.Tx, s Scope, consumers, keys, locks []string) ([]string, error) {
	b := &pgx.Batch{}
	_ = db.New(batchQueue{b}).ReceiptKeyLock(ctx, db.ReceiptKeyLockParams{Keys: locks, ScopeID: s.ID})
	queueQuery(ctx, b, func(q *db.Queries) error {
		_, err := q.ReceiptPromote(ctx, db.ReceiptPromoteParams{ScopeID: s.ID, ScopeKind: string(s.Kind), Consumers: consumers, Keys: keys})
		return err
	})
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("locking the ordering keys: %w", err)
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
