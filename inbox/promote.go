package inbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/pipetx"
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
//
// With generic, the promotion runs on a generic plan: left to choose, the
// server plans it at every commit, and planning it costs more than running
// it. Only COMMIT follows it, so the setting ends with the transaction. Not
// on Citus, which routes a statement by planning it for its parameters.
func promotion(ctx context.Context, jobs []*job, generic bool) *pgx.Batch {
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
	b := &pgx.Batch{}
	if generic {
		b.Queue("SELECT " + pipetx.ForceGenericPlan)
	}
	queuePromotion(ctx, b, jobs[0].l.r.Identity.Scope, consumers, keys, locks)
	return b
}

// queuePromotion queues the keys' locks and the promotion of their next
// receipts (which runs after the locks are granted, with a snapshot taken
// then); the promotion returns the consumers of the promoted receipts.
func queuePromotion(ctx context.Context, b *pgx.Batch, s Scope, consumers, keys, locks []string) {
	_ = db.New(batchQueue{b}).ReceiptKeyLock(ctx, db.ReceiptKeyLockParams{Keys: locks, ScopeID: s.ID})
	queueQuery(ctx, b, func(q *db.Queries) error {
		_, err := q.ReceiptPromote(ctx, db.ReceiptPromoteParams{ScopeID: s.ID, ScopeKind: string(s.Kind), Consumers: consumers, Keys: keys})
		return err
	})
}

// promoteKeys locks the keys and promotes their next receipts in one round
// trip, returning the consumers of the promoted receipts.
func promoteKeys(ctx context.Context, tx pgx.Tx, s Scope, consumers, keys, locks []string) ([]string, error) {
	b := &pgx.Batch{}
	queuePromotion(ctx, b, s, consumers, keys, locks)
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
