package inbox

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
)

// acceptBatchRouted is the batch accept's insert on Citus, for entries of one
// scope. ReceiptAcceptBatch's INSERT ... SELECT unnest(...) is pulled through
// the coordinator; here each distinct identity is a ReceiptInsertRouted
// (INSERT ... VALUES with the scope, on the scope's node), then one
// ReceiptQueueBatchRouted adds the queue rows of those inserted and
// ReceiptNotify wakes the workers (on the coordinator), all sent as one
// pipeline: one round trip. autocommit wraps it in a transaction of its own
// (one commit, on the scope's node); otherwise it runs in the caller's.
// It returns the IDs inserted, read from the inserts' row counts.
//
// distinct and arg are acceptBatch's: the distinct identities in the global
// insert order, and their columns. The wake-up is sent even when nothing is
// inserted (the pipeline cannot know before it runs).
func acceptBatchRouted(ctx context.Context, b batcher, entries []batchEntry, distinct []int, arg db.ReceiptAcceptBatchParams, autocommit bool) ([]ID, error) {
	scope := entries[distinct[0]].d.identity.Scope
	batch := &pgx.Batch{}
	if autocommit {
		batch.Queue("BEGIN")
	}
	// SET LOCAL, which reaches the scope's node (scope_citus.go).
	if err := queueScopeCitus(ctx, batch, scopeParams(scope)); err != nil {
		return nil, err
	}
	q := db.New(batchQueue{batch})
	var consumers []string
	seen := map[string]bool{}
	for _, i := range distinct {
		p := entries[i].d.acceptParams(false)
		_ = q.ReceiptInsertRouted(ctx, db.ReceiptInsertRoutedParams{
			ID: p.ID, ScopeKind: p.ScopeKind, ScopeID: p.ScopeID, Source: p.Source,
			Consumer: p.Consumer, MessageID: p.MessageID, EventType: p.EventType,
			SchemaVersion: p.SchemaVersion, Fingerprint: p.Fingerprint, Payload: p.Payload,
			Metadata: p.Metadata, MaxAttempts: arg.MaxAttempts,
		})
		if !seen[p.Consumer] {
			seen[p.Consumer] = true
			consumers = append(consumers, p.Consumer)
		}
	}
	_ = q.ReceiptQueueBatchRouted(ctx, db.ReceiptQueueBatchRoutedParams{ScopeID: scope.ID, Ids: arg.Ids})
	if arg.Notify {
		_ = q.ReceiptNotify(ctx, consumers)
	}
	if autocommit {
		batch.Queue("COMMIT")
	}

	ahead := scopeStatementsCitus // the scope, with the BEGIN before it (sendScoped)
	if autocommit {
		ahead++
	}
	br := sendScoped(ctx, b, batch, ahead)
	inserted, err := readAcceptBatchRouted(br, entries, distinct, autocommit, arg.Notify)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if c, ok := b.(*pgxpool.Conn); ok && autocommit && c.Conn().PgConn().TxStatus() != 'I' {
			// A failed statement left the transaction open (aborted): end it
			// so the connection goes back to the pool clean.
			_, _ = c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		return nil, err
	}
	return inserted, nil
}

// readAcceptBatchRouted reads acceptBatchRouted's results in order.
func readAcceptBatchRouted(br pgx.BatchResults, entries []batchEntry, distinct []int, autocommit, notify bool) ([]ID, error) {
	execs := scopeStatementsCitus // the scope
	if autocommit {
		execs++ // BEGIN
	}
	for range execs {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	var inserted []ID
	for _, i := range distinct {
		tag, err := br.Exec()
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 1 {
			inserted = append(inserted, entries[i].d.id)
		}
	}
	execs = 1 // the queue rows
	if notify {
		execs++
	}
	if autocommit {
		execs++ // COMMIT
	}
	for range execs {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	return inserted, nil
}
