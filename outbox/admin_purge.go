package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox"
)

// PurgeParams configures Purge.
type PurgeParams struct {
	// OlderThan deletes events published more than this long ago. Required.
	OlderThan time.Duration
	// BatchSize is the most events one statement deletes, each batch its own
	// short transaction. Defaults to DefaultPurgeBatchSize; at most
	// MaxPurgeBatchSize.
	BatchSize int
	// Progress, if set, is called after every batch with the total so far.
	Progress func(deleted int64)
}

// PurgeResult counts what Purge did.
type PurgeResult struct {
	// Cutoff is the publication time before which events were deleted: now
	// minus OlderThan.
	Cutoff  time.Time
	Deleted int64         // PUBLISHED events deleted
	Elapsed time.Duration // the purge's wall time
}

func (p PurgeParams) cutoff() (time.Time, int, error) {
	if p.OlderThan <= 0 {
		return time.Time{}, 0, &inbox.ValidationError{Field: "older_than", Rule: inbox.RuleRequired, Detail: fmt.Sprintf("%s: set the retention period, a positive duration", p.OlderThan)}
	}
	size := p.BatchSize
	switch {
	case size == 0:
		size = DefaultPurgeBatchSize
	case size < 0 || size > MaxPurgeBatchSize:
		return time.Time{}, 0, &inbox.ValidationError{Field: "batch_size", Rule: inbox.RuleOutOfRange, Detail: fmt.Sprintf("%d: must be between 1 and %d", size, MaxPurgeBatchSize)}
	}
	return time.Now().Add(-p.OlderThan), size, nil
}

// Purge deletes PUBLISHED events published before the cutoff, in batches.
// Unpublished and DEAD events are never deleted. Relays do this by
// themselves after RelayConfig.Retention; Purge is for a shorter history now.
// Safe to run next to relays and to interrupt: finished batches stay
// deleted.
func (a *Admin) Purge(ctx context.Context, p PurgeParams) (PurgeResult, error) {
	cutoff, size, err := p.cutoff()
	if err != nil {
		return PurgeResult{}, err
	}
	start := time.Now()
	drv, err := a.drv.Get(ctx, a.pool)
	if err != nil {
		return PurgeResult{}, dbError("reading the outbox's layout (Citus or one server)", err)
	}
	n, err := drv.Outbox().Purge(ctx, a.pool, cutoff, size, p.Progress)
	res := PurgeResult{Cutoff: cutoff, Deleted: n, Elapsed: time.Since(start)}
	if err != nil {
		return res, dbError("outbox purge", err)
	}
	if n > 0 {
		a.log.Info("pginbox admin: deleted published outbox events", "cutoff", cutoff, "deleted", n)
	}
	return res, nil
}

// PurgeCount returns how many events Purge with p would delete now, and the
// cutoff, without changing anything.
func (a *Admin) PurgeCount(ctx context.Context, p PurgeParams) (int64, time.Time, error) {
	cutoff, _, err := p.cutoff()
	if err != nil {
		return 0, time.Time{}, err
	}
	n, err := db.New(a.pool).OutboxPurgeCount(ctx, cutoff)
	if err != nil {
		return 0, time.Time{}, dbError("outbox purge count", err)
	}
	return n, cutoff, nil
}
