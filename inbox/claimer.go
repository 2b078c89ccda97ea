package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pginbox/pginbox/internal/driver"
)

// claimLoop keeps the ready queue topped up: it claims when there is room,
// again at once after a full claim, and otherwise waits for a notification, a
// freed slot or the poll interval.
//
// A notification is claimed for as soon as there is room, queue half empty or
// not: the new message may be another scope's, and the claim serves scopes in
// turns, so it reaches a slot after one handler instead of after the queued
// backlog of a busy scope.
func (w *Worker) claimLoop(ctx context.Context) {
	poll := time.NewTimer(0)
	defer poll.Stop()
	var partialLogged time.Time // the last round answered in part that was logged
	for {
		// Slots whose handler hung take no work until it returns.
		alive := w.cfg.Concurrency - int(w.abandonedSlots.Load())
		capacity := 0
		if alive > 0 {
			capacity = alive*w.cfg.MessagesPerTx + w.cfg.ClaimBatch
		}
		held := w.leases.count()
		free := capacity - held
		queued := held - int(w.running.Load())
		claimed, full, failed := false, false, false
		// Top the queue up once half of it is taken, so handlers never wait
		// for a claim and claims stay batched.
		if free > 0 && (queued <= w.cfg.ClaimBatch/2 || w.notified.Load()) {
			w.notified.Store(false)
			n := min(free, w.cfg.ClaimBatch)
			leases, more, err := w.claim(ctx, n, true)
			if err != nil && ctx.Err() == nil {
				// A round the database answered in part (Citus, a node down)
				// is not a database refusing work: notifications go on
				// starting claims. Only a claim that got no answer waits for
				// the poll.
				var partial *driver.PartialClaimError
				failed = !errors.As(err, &partial)
				// Rounds answered in part follow the notifications while
				// the node is down: log one per poll interval, not each.
				if failed || time.Since(partialLogged) >= w.cfg.PollInterval {
					w.log.Error("pginbox worker: claim failed", "error", err)
					if !failed {
						partialLogged = time.Now()
					}
				}
			}
			for _, l := range w.queue.push(leases) {
				w.handBack(l) // stopping: nobody will run it
			}
			claimed = true
			full = more
			if err == nil && len(leases) == 0 {
				w.watchRestriction(ctx)
			}
		}
		if full && ctx.Err() == nil {
			continue // probably more due work
		}
		// A freed slot matters only when the worker held back; after a claim
		// that came up short, only a notification or the poll brings work.
		var slotFreed chan struct{}
		if !claimed {
			slotFreed = w.slotFreed
		}
		// After a failed claim only the poll retries: notifications keep
		// coming while accepts commit, and one claim per notification on a
		// database that refuses connections is a busy loop.
		wake := w.wake
		if failed {
			wake = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-slotFreed:
		case <-poll.C:
			poll.Reset(w.cfg.PollInterval)
		}
	}
}

// claim claims up to n due receipts and reports whether more are probably
// due (a share of the claim came back full, or it served as many scopes as
// it may). Once sent, it is not interrupted by ctx: a
// claim that committed unseen would leave receipts PROCESSING until their
// leases expire. skipIdle lets it pass over Citus worker nodes that had
// nothing due and sent no wake-up since (the claim loop; Drain asks every
// node).
func (w *Worker) claim(ctx context.Context, n int, skipIdle bool) ([]*lease, bool, error) {
	if ctx.Err() != nil {
		return nil, false, nil
	}
	var batch []claimed
	var more bool
	var err error
	if w.nodes != nil {
		batch, more, err = w.claimNodes(ctx, n, skipIdle)
	} else {
		batch, more, err = w.claimOn(ctx, w.sys, -1, n)
	}
	if err != nil && len(batch) == 0 {
		return nil, false, err
	}
	leases := w.leases.add(batch)
	if w.events.active() {
		for _, r := range batch {
			w.events.publish(receiptEvent(EventClaimed, r))
		}
	}
	if w.hooks.afterClaim != nil && len(batch) > 0 {
		w.hooks.afterClaim(len(batch))
	}
	return leases, more && err == nil, err
}

// claimOn claims up to n due receipts on pool (node: the Citus worker node
// it runs on, -1 for none) with that node's claimer. Rows returned with an
// error are committed.
func (w *Worker) claimOn(ctx context.Context, pool *pgxpool.Pool, node, n int) ([]claimed, bool, error) {
	// Waiting for a connection may end with ctx; nothing was sent yet.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, nil
		}
		return nil, false, dbError("claim", err)
	}
	defer conn.Release()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeepingTimeout)
	defer cancel()
	drv, err := w.drv.Get(cctx, conn)
	if err != nil {
		return nil, false, dbError("claim", err)
	}
	claims := w.claimerOf(drv, node)
	scopes, n := w.claimShape(n)
	rows, more, err := claims.Claim(cctx, conn, scopes, n)
	if err != nil {
		err = dbError("claim", err)
	}
	batch := make([]claimed, len(rows))
	for i, r := range rows {
		batch[i] = claimedFromRow(r)
		batch[i].node = node
	}
	return batch, more, err
}

// woke tells node's claimer of a wake-up from that node (all of them for
// node -1: a wake-up whose node is unknown), and the idle nodes.
func (w *Worker) woke(node int) {
	now := time.Now()
	if node < 0 {
		w.idle.wakeAll()
	} else {
		w.idle.wake(node)
	}
	w.claimsMu.Lock()
	defer w.claimsMu.Unlock()
	for i, c := range w.claims {
		if c != nil && (node < 0 || i == node+1) {
			c.Woke(now)
		}
	}
}

// claimerOf returns the claimer of node (-1: the pool's server), made at
// its first claim: a node's claims list the scopes of its own shards.
func (w *Worker) claimerOf(drv driver.Driver, node int) driver.Claimer {
	w.claimsMu.Lock()
	defer w.claimsMu.Unlock()
	for len(w.claims) <= node+1 {
		w.claims = append(w.claims, nil)
	}
	if w.claims[node+1] == nil {
		w.claims[node+1] = drv.NewClaimer(driver.ClaimerConfig{
			Consumers: w.owned,
			Lease:     w.cfg.Lease,
			Local:     node >= 0,
			Listed: func(n int) {
				if w.hooks.listed != nil {
					w.hooks.listed(n)
				}
			},
		})
	}
	return w.claims[node+1]
}

// claimNodes claims on the Citus worker nodes (WorkerConfig.Nodes), each
// from its own shards: first each node for its share of what the nodes
// before it left of n, so a busy node's backlog cannot hold another node's
// scopes back beyond one claim, then the nodes that filled their share for
// what is left. The node asked first goes round from claim to claim. A
// node that fails is skipped: the others' rows come back with a
// *driver.PartialClaimError.
func (w *Worker) claimNodes(ctx context.Context, n int, skipIdle bool) ([]claimed, bool, error) {
	count := w.nodes.Count()
	start := w.nextNode % count
	w.nextNode = start + 1
	var asked []int
	for k := range count {
		if i := (start + k) % count; !skipIdle || !w.idle.skip(i, w.cfg.PollInterval) {
			asked = append(asked, i)
		}
	}
	var out []claimed
	more := false
	var errs []error
	answered := 0
	ask := func(i, k int) bool {
		pool, err := w.nodes.n.Pool(w.sys, i)
		if err != nil {
			errs = append(errs, err)
			return false
		}
		woken := w.idle.before(i)
		rows, m, err := w.claimOn(ctx, pool, i, k)
		w.idle.claimed(i, err == nil && len(rows) == 0, woken)
		out = append(out, rows...)
		more = more || m
		if err != nil {
			var partial *driver.PartialClaimError
			if errors.As(err, &partial) {
				answered++
			}
			errs = append(errs, fmt.Errorf("node %s: %w", w.nodes.n.Addr(i), err))
			return false
		}
		answered++
		return len(rows) == k
	}
	var filled []int
	for k, i := range asked {
		left := n - len(out)
		if left <= 0 {
			break
		}
		if ask(i, (left+len(asked)-k-1)/(len(asked)-k)) {
			filled = append(filled, i)
		}
	}
	for _, i := range filled {
		if left := n - len(out); left > 0 {
			ask(i, left)
		}
	}
	more = more || len(out) == n
	err := errors.Join(errs...)
	if err != nil && answered > 0 {
		err = &driver.PartialClaimError{Err: err}
	}
	return out, more, err
}
