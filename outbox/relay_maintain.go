package outbox

import (
	"context"
	"time"

	"github.com/pginbox/pginbox/internal/service"
)

// Batch sizes of the maintenance statements.
const (
	recoverBatch = 100
	purgeBatch   = 1000
)

// maintenance recovers expired leases and deletes published history past
// retention, at start and every Lease/2.
func (r *Relay) maintenance() *service.Ticker {
	return &service.Ticker{Base: r.base, Interval: r.cfg.Lease / 2, Jobs: []service.Job{{
		What: "lease recovery",
		Run: func(ctx context.Context) error {
			_, err := r.RecoverExpired(ctx)
			return err
		},
	}, {
		What: "deleting published events past retention",
		Run: func(ctx context.Context) error {
			n, err := r.purge(ctx, time.Now().Add(-r.cfg.Retention))
			if err == nil && n > 0 {
				r.log.Info("pginbox relay: deleted published events past retention", "deleted", n, "retention", r.cfg.Retention)
			}
			return err
		},
	}}}
}

// RecoverExpired returns events whose lease expired to PENDING (or DEAD when
// their attempts are spent) and reports how many. Every running relay does
// this periodically; no leader is needed.
func (r *Relay) RecoverExpired(ctx context.Context) (int, error) {
	drv, err := r.driver(ctx)
	if err != nil {
		return 0, err
	}
	rows, err := drv.Recover(ctx, r.pool, int32(r.cfg.MaxAttempts))
	for _, row := range rows {
		r.log.Warn("pginbox relay: recovered an expired lease; the event will be published again", "event_id", row.ID, "status", row.Status)
	}
	if len(rows) > 0 {
		service.Signal(r.wake)
	}
	if err != nil {
		return len(rows), dbError("outbox recover", err)
	}
	return len(rows), nil
}

// purge deletes events published before cutoff, in batches.
func (r *Relay) purge(ctx context.Context, cutoff time.Time) (int64, error) {
	drv, err := r.driver(ctx)
	if err != nil {
		return 0, err
	}
	n, err := drv.Purge(ctx, r.pool, cutoff, purgeBatch, nil)
	if err != nil {
		return n, dbError("outbox purge", err)
	}
	return n, nil
}
