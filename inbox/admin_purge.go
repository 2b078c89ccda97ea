package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/pginbox/pginbox/db"
)

// MaxPurgeAge is the longest PurgeParams.OlderThan: 100 years.
const MaxPurgeAge = 100 * 365 * 24 * time.Hour

// PurgeParams configures Purge. Set exactly one of OlderThan and Before.
type PurgeParams struct {
	// OlderThan purges receipts completed more than this long ago.
	OlderThan time.Duration
	// Before purges receipts completed before this instant.
	Before time.Time
	// BatchSize is the most receipts one statement purges. Each batch is its own
	// short transaction, so locks, WAL bursts and replication lag stay bounded.
	// Defaults to DefaultPurgeBatchSize; at most MaxPurgeBatchSize.
	BatchSize int
	// Pause is a rest between batches, to let replicas and autovacuum keep up.
	// Defaults to none.
	Pause time.Duration
	// Progress, if set, is called after every batch with the totals so far.
	Progress func(PurgeResult)
}

// PurgeResult counts what Purge did.
type PurgeResult struct {
	// Cutoff is the completion time before which payloads were purged.
	Cutoff time.Time
	// Purged is the number of receipts whose payload was dropped.
	Purged int64
	// Batches is the number of statements that purged at least one receipt.
	Batches int
	Elapsed time.Duration // the purge's wall time
}

func (p PurgeParams) cutoff() (time.Time, int, error) {
	switch {
	case p.OlderThan < 0:
		return time.Time{}, 0, &ValidationError{Field: "older_than", Rule: RuleOutOfRange, Detail: fmt.Sprintf("%s: must not be negative", p.OlderThan)}
	case p.OlderThan > 0 && !p.Before.IsZero():
		return time.Time{}, 0, &ValidationError{Field: "older_than", Rule: RuleOutOfRange, Detail: "set OlderThan or Before, not both"}
	case p.OlderThan == 0 && p.Before.IsZero():
		return time.Time{}, 0, &ValidationError{Field: "older_than", Rule: RuleRequired, Detail: "set the retention period (OlderThan) or a cutoff time (Before)"}
	case p.OlderThan > MaxPurgeAge:
		return time.Time{}, 0, &ValidationError{Field: "older_than", Rule: RuleOutOfRange, Detail: fmt.Sprintf("%s: at most %s (100 years)", p.OlderThan, MaxPurgeAge)}
	case p.Before.After(time.Now()):
		return time.Time{}, 0, &ValidationError{Field: "before", Rule: RuleOutOfRange, Detail: fmt.Sprintf("%s is in the future: it would purge payloads up to the last completion, so no receipt could be replayed", p.Before.UTC().Format(time.RFC3339))}
	case p.Pause < 0 || p.Pause > time.Hour:
		return time.Time{}, 0, &ValidationError{Field: "pause", Rule: RuleOutOfRange, Detail: fmt.Sprintf("%s: must be between 0 and 1h", p.Pause)}
	}
	size := p.BatchSize
	switch {
	case size == 0:
		size = DefaultPurgeBatchSize
	case size < 0 || size > MaxPurgeBatchSize:
		return time.Time{}, 0, &ValidationError{Field: "batch_size", Rule: RuleOutOfRange, Detail: fmt.Sprintf("%d: must be between 1 and %d", size, MaxPurgeBatchSize)}
	}
	if !p.Before.IsZero() {
		return p.Before, size, nil
	}
	// Retention periods are days; the client clock is close enough.
	return time.Now().Add(-p.OlderThan), size, nil
}

// Purge drops the payloads of the view's COMPLETED receipts completed before
// the cutoff, in batches of BatchSize, each its own statement. Identity,
// fingerprint, metadata and lineage stay, so a redelivery of a purged message
// is still a Duplicate and a changed one still an identity conflict; a purged
// receipt cannot be replayed.
//
// Purge is safe to run while workers and other purges run, and to interrupt:
// every finished batch is committed, and the next run carries on. When ctx ends
// it returns the counts so far with ctx's error.
func (v *AdminView) Purge(ctx context.Context, p PurgeParams) (PurgeResult, error) {
	if v.err != nil {
		return PurgeResult{}, v.err
	}
	cutoff, size, err := p.cutoff()
	if err != nil {
		return PurgeResult{}, err
	}
	start := time.Now()
	res := PurgeResult{Cutoff: cutoff}
	all, kind, sid := v.scopeArgs()
	q, err := v.queries(ctx)
	if err != nil {
		return PurgeResult{}, err
	}
	scopes := []db.ReceiptPurgeScopesRow{{ScopeKind: kind, ScopeID: sid}}
	if all {
		drv, err := v.admin.drv.Get(ctx, v.admin.sys)
		if err != nil {
			return PurgeResult{}, dbError("purge", err)
		}
		// One statement across scopes, or scope by scope where a lock
		// across shards is refused (Citus).
		if scopes, all, err = drv.PurgeScopes(ctx, v.admin.sys, cutoff); err != nil {
			return PurgeResult{}, dbError("purge: listing the scopes", err)
		}
	}
	for _, s := range scopes {
		if err := v.purgeScope(ctx, q, p, all, s, cutoff, size, &res, start); err != nil {
			return res, err
		}
	}
	res.Elapsed = time.Since(start)
	if res.Purged > 0 {
		v.admin.log.Info("pginbox admin: purged payloads", "view", v.String(), "cutoff", cutoff,
			"purged", res.Purged, "batches", res.Batches, "elapsed", res.Elapsed.Round(time.Millisecond))
	}
	return res, nil
}

// purgeScope purges scope s (every scope when all) batch by batch until a
// batch comes back short, adding to res.
func (v *AdminView) purgeScope(ctx context.Context, q *db.Queries, p PurgeParams, all bool, s db.ReceiptPurgeScopesRow,
	cutoff time.Time, size int, res *PurgeResult, start time.Time) error {
	for {
		n, err := q.ReceiptPurge(ctx, db.ReceiptPurgeParams{
			Cutoff: cutoff, AllScopes: all, ScopeKind: s.ScopeKind, ScopeID: s.ScopeID, MaxCount: int32(size),
		})
		if err != nil {
			res.Elapsed = time.Since(start)
			if ctx.Err() != nil {
				return fmt.Errorf("pginbox: purge interrupted after %d receipts: %w", res.Purged, ctx.Err())
			}
			return dbError("purge", err)
		}
		if n > 0 {
			res.Purged += n
			res.Batches++
			res.Elapsed = time.Since(start)
			if p.Progress != nil {
				p.Progress(*res)
			}
		}
		// A short batch means the candidates ran out (or the rest are locked by
		// an admin action right now and wait for the next run).
		if n < int64(size) {
			return nil
		}
		if p.Pause > 0 {
			t := time.NewTimer(p.Pause)
			select {
			case <-ctx.Done():
				t.Stop()
				res.Elapsed = time.Since(start)
				return fmt.Errorf("pginbox: purge interrupted after %d receipts: %w", res.Purged, ctx.Err())
			case <-t.C:
			}
		}
	}
}

// PurgeCount returns how many receipts Purge with p would purge now, without
// changing anything (for dry runs).
func (v *AdminView) PurgeCount(ctx context.Context, p PurgeParams) (int64, time.Time, error) {
	if v.err != nil {
		return 0, time.Time{}, v.err
	}
	cutoff, _, err := p.cutoff()
	if err != nil {
		return 0, time.Time{}, err
	}
	q, err := v.queries(ctx)
	if err != nil {
		return 0, time.Time{}, err
	}
	all, kind, sid := v.scopeArgs()
	n, err := q.ReceiptPurgeCount(ctx, db.ReceiptPurgeCountParams{
		Cutoff: cutoff, AllScopes: all, ScopeKind: kind, ScopeID: sid,
	})
	if err != nil {
		return 0, time.Time{}, dbError("purge count", err)
	}
	return n, cutoff, nil
}
