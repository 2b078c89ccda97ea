package outbox

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
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
	distributed, err := r.layout.get(ctx, r.pool)
	if err != nil {
		return 0, err
	}
	if distributed {
		rows, err := r.recoverScopes(ctx)
		for _, row := range rows {
			r.log.Warn("pginbox relay: recovered an expired lease; the event will be published again", "event_id", row.ID, "status", row.Status)
		}
		if len(rows) > 0 {
			service.Signal(r.wake)
		}
		return len(rows), err
	}
	total := 0
	for {
		rows, err := db.New(r.pool).OutboxRecover(ctx, db.OutboxRecoverParams{MaxAttempts: int32(r.cfg.MaxAttempts), MaxCount: recoverBatch})
		if err != nil {
			return total, dbError("outbox recover", err)
		}
		for _, row := range rows {
			r.log.Warn("pginbox relay: recovered an expired lease; the event will be published again", "event_id", row.ID, "status", row.Status)
		}
		total += len(rows)
		if len(rows) > 0 {
			service.Signal(r.wake)
		}
		if len(rows) < recoverBatch {
			return total, nil
		}
	}
}

// purge deletes events published before cutoff, in batches.
func (r *Relay) purge(ctx context.Context, cutoff time.Time) (int64, error) {
	distributed, err := r.layout.get(ctx, r.pool)
	if err != nil {
		return 0, err
	}
	if distributed {
		return purgeScopes(ctx, r.pool, cutoff, purgeBatch, nil)
	}
	return purgePublished(ctx, r.pool, cutoff, purgeBatch, nil)
}

// purgePublished deletes events published before cutoff, size per statement,
// until a short batch; progress, if set, gets the running total.
func purgePublished(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, size int, progress func(int64)) (int64, error) {
	q := db.New(pool)
	var total int64
	for {
		n, err := q.OutboxPurge(ctx, db.OutboxPurgeParams{Cutoff: cutoff, MaxCount: int32(size)})
		if err != nil {
			return total, dbError("outbox purge", err)
		}
		total += n
		if n > 0 && progress != nil {
			progress(total)
		}
		if n < int64(size) {
			return total, nil
		}
	}
}
