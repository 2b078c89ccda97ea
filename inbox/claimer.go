package inbox

import (
	"context"
	"errors"
	"time"

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
			leases, more, err := w.claim(ctx, n)
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
// leases expire.
func (w *Worker) claim(ctx context.Context, n int) ([]*lease, bool, error) {
	if ctx.Err() != nil {
		return nil, false, nil
	}
	// Waiting for a connection may end with ctx; nothing was sent yet.
	conn, err := w.sys.Acquire(ctx)
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
	if w.claims == nil {
		w.claims = drv.NewClaimer(driver.ClaimerConfig{
			Consumers: w.owned,
			Lease:     w.cfg.Lease,
			Listed: func(n int) {
				if w.hooks.listed != nil {
					w.hooks.listed(n)
				}
			},
		})
	}
	scopes, n := w.claimShape(n)
	rows, more, err := w.claims.Claim(cctx, conn, scopes, n)
	if err != nil {
		err = dbError("claim", err)
		if len(rows) == 0 {
			return nil, false, err
		}
	}
	batch := make([]claimed, len(rows))
	for i, r := range rows {
		batch[i] = claimedFromRow(r)
	}
	leases := w.leases.add(batch)
	if w.events.active() {
		for _, r := range batch {
			w.events.publish(receiptEvent(EventClaimed, r))
		}
	}
	if w.hooks.afterClaim != nil && len(rows) > 0 {
		w.hooks.afterClaim(len(rows))
	}
	return leases, more && err == nil, err
}
