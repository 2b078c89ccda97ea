package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

var errBatchBroken = errors.New("pginbox: another message of the batch broke its transaction")

// processBatch runs several claimed receipts in one transaction, each handler
// in its own savepoint: a failure rolls back only that message, and one commit
// (one disk flush) completes the rest.
func (w *Worker) processBatch(ls []*lease) {
	jobs := make([]*job, 0, len(ls))
	for _, l := range ls {
		defer w.leases.drop(l)
		if j := w.prepare(l); j != nil {
			defer func() { j.cancel() }() // startClock replaces it
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return
	}
	ctx := context.WithoutCancel(jobs[0].ctx)
	tx, err := w.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: w.beginQuery()})
	if err != nil {
		for _, j := range jobs {
			j.err = fmt.Errorf("starting the handler transaction: %w", err)
			w.settle(j)
		}
		return
	}
	defer tx.Rollback(ctx)

	var completed []*job
	for _, j := range jobs {
		// pgx closes a connection whose query's context ends mid-statement, so a
		// message that timed out or lost its lease can take the transaction down.
		if tx.Conn().IsClosed() {
			j.err = errBatchBroken
			continue
		}
		j.startClock(w.cfg.HandlerTimeout)
		sp, err := tx.Begin(j.ctx) // SAVEPOINT
		if err != nil {
			j.err = fmt.Errorf("starting the message's savepoint: %w", err)
			continue
		}
		ok, err := w.handleAndComplete(sp, j)
		j.err = err
		if !ok {
			if rerr := sp.Rollback(ctx); rerr != nil && j.err == nil {
				j.err = fmt.Errorf("rolling back the message's savepoint: %w", rerr)
			}
			continue
		}
		if err := sp.Commit(ctx); err != nil { // RELEASE SAVEPOINT
			j.err = fmt.Errorf("releasing the message's savepoint: %w", err)
			continue
		}
		completed = append(completed, j)
	}
	if len(completed) > 0 && tx.Conn().IsClosed() {
		for _, j := range completed {
			j.err = errBatchBroken // COMMIT was never sent: certainly not committed
		}
		completed = nil
	}
	if len(completed) > 0 {
		if w.hooks.beforeCommit != nil {
			for _, j := range completed {
				w.hooks.beforeCommit(j.l.r.ID)
			}
		}
		fctx, cancel := context.WithTimeout(ctx, bookkeepingTimeout)
		err := tx.Commit(fctx)
		if err != nil {
			for _, j := range completed {
				j.err = w.commitFailed(fctx, j, err)
			}
		}
		cancel()
	}
	for _, j := range jobs {
		if errors.Is(j.err, errBatchBroken) {
			// Not this message's failure: hand it back without spending its attempt.
			j.log.Warn("pginbox worker: another message broke the batch's transaction, releasing this one")
			w.release(j.l.r, j.log)
			continue
		}
		w.settle(j)
	}
}
