package inbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
)

// runBatch runs a slot's receipts in one transaction, without savepoints: one
// statement completes them all and loads their payloads, the handlers run one
// after another, and one commit makes it all durable. When something fails,
// only the culprit is charged:
//   - a handler fails: its attempt is recorded, and the others run again in
//     one transaction with a savepoint each, so a further failure rolls back
//     alone;
//   - the server refuses the COMMIT (a deferred constraint, say), or the start
//     fails (a payload the server cannot load): every receipt runs again in a
//     transaction of its own, and only the one that fails there is charged.
//
// Receipts run again within the same claim, so a rerun spends no attempt.
func (w *Worker) runBatch(r *run, jobs []*job) {
	res := w.transact(r, jobs)
	rest := r.settleLost(jobs, res.lost)
	switch {
	case res.startErr != nil:
		w.log.Warn("pginbox worker: a batched transaction could not start, running its receipts one by one", "error", res.startErr)
		w.runIsolated(r, rest)
	case res.commitErr != nil:
		w.log.Warn("pginbox worker: the server refused a batched commit, running its receipts one by one to find the culprit", "error", res.commitErr)
		w.runIsolated(r, rest)
	case res.failed != nil:
		r.settle(res.failed)
		w.runSavepoints(r, without(rest, res.failed))
	default:
		for _, j := range rest {
			r.settle(j) // committed
		}
	}
}

// runSavepoints runs jobs in one transaction, each in a savepoint that also
// holds its completion, so a failing handler rolls back its own message only.
// What cannot finish there (the connection broke, the server refused the
// commit) runs again in transactions of its own.
func (w *Worker) runSavepoints(r *run, jobs []*job) {
	if len(jobs) == 0 || r.state.Load() == runAbandoned {
		return
	}
	sctx, cancel := context.WithTimeout(jobs[0].base, w.cfg.HandlerTimeout)
	defer cancel()
	// The scope is set outside every savepoint, so rolling one back keeps it.
	tx, pid, err := w.openTx(sctx, jobs[0].l.r)
	if err != nil {
		w.runIsolated(r, jobs)
		return
	}
	defer tx.Rollback(context.Background())
	defer r.pid.Store(0)

	var ok, failed, again []*job
	for i, j := range jobs {
		// A handler cancelled in the middle of a statement makes pgx close the
		// connection: the rest cannot run in this transaction.
		if tx.Conn().IsClosed() {
			again = append(again, jobs[i:]...)
			break
		}
		switch w.runInSavepoint(r, tx, sctx, j, pid) {
		case savepointCommitted:
			ok = append(ok, j)
		case savepointFailed:
			failed = append(failed, j)
		case savepointLost:
			r.settle(j)
		}
		if r.state.Load() == runAbandoned {
			return
		}
	}
	if len(ok) > 0 {
		if tx.Conn().IsClosed() {
			again = append(again, ok...) // COMMIT was never sent
		} else if err := w.commit(tx, ok); err != nil {
			w.log.Warn("pginbox worker: the server refused a batched commit, running its receipts one by one to find the culprit", "error", err)
			again = append(again, ok...)
		} else {
			for _, j := range ok {
				r.settle(j)
			}
		}
	}
	for _, j := range failed {
		r.settle(j)
	}
	for _, j := range again {
		j.err = nil
	}
	w.runIsolated(r, again)
}

type savepointOutcome int

const (
	savepointCommitted savepointOutcome = iota // released: commits with the transaction
	savepointFailed                            // rolled back; j.err says why
	savepointLost                              // another worker owns the receipt
)

// runInSavepoint completes j's receipt and runs its handler in a savepoint of
// tx, and rolls the savepoint back if the handler fails.
func (w *Worker) runInSavepoint(r *run, tx pgx.Tx, sctx context.Context, j *job, pid uint32) savepointOutcome {
	sp, err := tx.Begin(sctx) // SAVEPOINT
	if err != nil {
		j.err = fmt.Errorf("starting the message's savepoint: %w", err)
		return savepointFailed
	}
	rows, err := db.New(sp).ReceiptStart(sctx, db.ReceiptStartParams{
		Ids: []string{j.l.r.ID.UUIDString()}, Tokens: []string{j.l.r.Token.UUIDString()},
		ScopeID: j.l.r.Identity.Scope.ID,
	})
	switch {
	case err != nil:
		j.err = fmt.Errorf("completing the receipt and loading its payload: %w", err)
	case len(rows) == 0:
		sp.Rollback(sctx)
		j.log.Warn("pginbox worker: lease lost before the handler started; another worker owns the receipt")
		j.lost = true
		return savepointLost
	default:
		r.pid.Store(pid)
		if j.err = j.load(rows[0]); j.err == nil {
			j.err = r.callHandler(j, &handlerTx{Tx: sp})
		}
	}
	if j.err != nil {
		if rerr := sp.Rollback(context.Background()); rerr != nil {
			j.err = fmt.Errorf("%w (rolling back its savepoint: %v)", j.err, rerr)
		}
		return savepointFailed
	}
	if err := sp.Commit(sctx); err != nil { // RELEASE SAVEPOINT
		j.err = fmt.Errorf("releasing the message's savepoint: %w", err)
		return savepointFailed
	}
	return savepointCommitted
}

// settleLost settles the jobs another worker took over and returns the rest.
func (r *run) settleLost(jobs, lost []*job) []*job {
	for _, j := range lost {
		r.settle(j)
	}
	rest := make([]*job, 0, len(jobs))
	for _, j := range jobs {
		if !contains(lost, j) {
			rest = append(rest, j)
		}
	}
	return rest
}

func without(jobs []*job, drop *job) []*job {
	out := make([]*job, 0, len(jobs))
	for _, j := range jobs {
		if j != drop {
			out = append(out, j)
		}
	}
	return out
}

func contains(jobs []*job, j *job) bool {
	for _, x := range jobs {
		if x == j {
			return true
		}
	}
	return false
}

// byScope splits jobs into groups of one scope each, in their order.
func byScope(jobs []*job) [][]*job {
	var groups [][]*job
	at := map[Scope]int{}
	for _, j := range jobs {
		s := j.l.r.Identity.Scope
		i, ok := at[s]
		if !ok {
			i = len(groups)
			at[s] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], j)
	}
	return groups
}
