package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/errtext"
	"github.com/pginbox/pginbox/internal/pipetx"
	"github.com/pginbox/pginbox/internal/scopelisting"
)

// claimScopesMax bounds the scopes one claim round on Citus asks.
const claimScopesMax = 16

// claimRows claims up to BatchSize due events: one statement across scopes
// on one server (OutboxClaim), per scope on Citus (claimScopes).
func (r *Relay) claimRows(ctx context.Context) ([]db.OutboxClaimRow, error) {
	distributed, err := r.layout.get(ctx, r.pool)
	if err != nil {
		return nil, err
	}
	if distributed {
		return r.claimScopes(ctx, r.cfg.BatchSize)
	}
	var rows []db.OutboxClaimRow
	err = asyncClaim(ctx, r.pool, func(q *db.Queries) error {
		var err error
		rows, err = q.OutboxClaim(ctx, db.OutboxClaimParams{
			LeaseMs:  r.cfg.Lease.Milliseconds(),
			MaxCount: int32(r.cfg.BatchSize),
		})
		return err
	})
	if err != nil {
		return nil, dbError("outbox claim", err)
	}
	return rows, nil
}

// claimScopes is the claim on Citus: the scopes with due events, oldest due
// first (OutboxDueScopes, a lock-free read of every shard), then per scope a
// claim of at most its fair share of n in a statement of its own on the
// scope's node (OutboxClaimScope); scopelisting.Claimer runs the rounds and
// reuses the read for a few times its cost. A scope whose claim fails (its
// node down) is skipped; the rows claimed before are returned with the
// error: they are committed. A worker node down fails the read; the round
// then claims from the scopes listed recently, so the other nodes' events
// keep flowing (a scope never listed waits until discovery works again).
func (r *Relay) claimScopes(ctx context.Context, n int) ([]db.OutboxClaimRow, error) {
	round := r.rounds.Claim(ctx, scopelisting.Source[db.OutboxDueScopesRow, db.OutboxClaimScopeRow]{
		List: func(ctx context.Context, limit int) ([]db.OutboxDueScopesRow, error) {
			return db.New(pipetx.FanOut{Pool: r.pool}).OutboxDueScopes(ctx, int32(limit))
		},
		// One statement outside a transaction: the node runs and commits it
		// alone (asyncClaim's setting would stay on the coordinator, and its
		// BEGIN and COMMIT would cost the node two commands more).
		Claim: func(ctx context.Context, s db.OutboxDueScopesRow, k int) ([]db.OutboxClaimScopeRow, error) {
			return db.New(r.pool).OutboxClaimScope(ctx, db.OutboxClaimScopeParams{
				ScopeID:    s.ScopeID,
				ClaimToken: inboxtype.New(),
				LeaseMs:    r.cfg.Lease.Milliseconds(),
				MaxCount:   int32(k),
			})
		},
		Fatal:  func(error) bool { return ctx.Err() != nil },
		Listed: r.hooks.listed,
	}, claimScopesMax, n)
	var errs []error
	if round.ListErr != nil {
		if round.Fallback == 0 {
			return nil, dbError("outbox claim: listing the scopes with due events", round.ListErr)
		}
		errs = append(errs, dbError(fmt.Sprintf("outbox claim: listing the scopes with due events (claiming from %d scopes seen recently instead)", round.Fallback), round.ListErr))
	}
	for _, f := range round.Failed {
		errs = append(errs, dbError(fmt.Sprintf("outbox claim (scope %q skipped)", f.Scope.ScopeID), f.Err))
	}
	if round.Fatal != nil {
		errs = append(errs, dbError("outbox claim", round.Fatal))
	}
	out := make([]db.OutboxClaimRow, len(round.Rows))
	for i, row := range round.Rows {
		out[i] = db.OutboxClaimRow(row)
	}
	return out, errors.Join(errs...)
}

// scopeJobs groups jobs by scope ID, in first-seen order.
func scopeJobs(jobs []*job) ([]string, map[string][]*job) {
	var order []string
	by := map[string][]*job{}
	for _, j := range jobs {
		id := j.msg.Scope.ID
		if _, ok := by[id]; !ok {
			order = append(order, id)
		}
		by[id] = append(by[id], j)
	}
	return order, by
}

// settleScopes is settle on Citus: per scope, the routed mark, fail and
// release statements. Failure times come from the relay's clock (Citus
// refuses a time computed from a column in a routed UPDATE).
func (r *Relay) settleScopes(ctx context.Context, jobs []*job) (int, error) {
	q := db.New(r.pool)
	order, by := scopeJobs(jobs)
	var errs []error
	marked, lost := 0, 0
	var failRows []db.OutboxFailRow
	now := time.Now()
	for _, scope := range order {
		var published, released settleArgs
		failed := db.OutboxFailScopeParams{ScopeID: scope, MaxAttempts: int32(r.cfg.MaxAttempts)}
		for _, j := range by[scope] {
			switch j.state {
			case jobPublished:
				published.add(j)
			case jobHeld:
				released.add(j)
			case jobFailed:
				failed.Ids = append(failed.Ids, j.msg.ID.UUIDString())
				failed.Tokens = append(failed.Tokens, j.token.UUIDString())
				failed.Errors = append(failed.Errors, errtext.Storable(j.err))
				dead := handler.IsPermanent(j.err)
				var delay time.Duration
				if !dead && j.msg.Attempt < r.cfg.MaxAttempts {
					delay = r.cfg.Backoff(j.msg.Attempt)
				}
				failed.AvailableAt = append(failed.AvailableAt, now.Add(delay))
				failed.Dead = append(failed.Dead, dead)
			}
		}
		if len(published.Ids) > 0 {
			ids, err := q.OutboxMarkPublishedScope(ctx, db.OutboxMarkPublishedScopeParams{
				ScopeID: scope, Ids: published.Ids, Tokens: published.Tokens,
			})
			if err != nil {
				errs = append(errs, dbError("outbox mark published", err))
			} else {
				marked += len(ids)
				lost += len(published.Ids) - len(ids)
			}
		}
		if len(failed.Ids) > 0 {
			rows, err := q.OutboxFailScope(ctx, failed)
			if err != nil {
				errs = append(errs, dbError("outbox record failure", err))
			}
			for _, row := range rows {
				failRows = append(failRows, db.OutboxFailRow(row))
			}
		}
		if len(released.Ids) > 0 {
			if _, err := q.OutboxReleaseScope(ctx, db.OutboxReleaseScopeParams{
				ScopeID: scope, Ids: released.Ids, Tokens: released.Tokens,
			}); err != nil {
				errs = append(errs, dbError("outbox release", err))
			}
		}
	}
	if lost > 0 {
		r.log.Warn("pginbox relay: leases lost before marking; those events will be published again", "lost", lost)
	}
	if len(failRows) > 0 {
		r.logFailures(jobs, failRows)
	}
	return marked, errors.Join(errs...)
}

// recoverScopes is lease recovery on Citus: the scopes with expired leases
// (OutboxExpiredScopes, lock-free), then each recovered on its node
// (OutboxRecoverScope) until a short batch.
func (r *Relay) recoverScopes(ctx context.Context) ([]db.OutboxRecoverRow, error) {
	q := db.New(r.pool)
	scopes, err := db.New(pipetx.FanOut{Pool: r.pool}).OutboxExpiredScopes(ctx, claimScopesMax)
	if err != nil {
		return nil, dbError("outbox recover: listing the scopes with expired leases", err)
	}
	var out []db.OutboxRecoverRow
	var errs []error
	for _, scope := range scopes {
		for {
			rows, err := q.OutboxRecoverScope(ctx, db.OutboxRecoverScopeParams{
				ScopeID: scope, MaxAttempts: int32(r.cfg.MaxAttempts), MaxCount: recoverBatch,
			})
			if err != nil {
				errs = append(errs, dbError(fmt.Sprintf("outbox recover (scope %q)", scope), err))
				break
			}
			for _, row := range rows {
				out = append(out, db.OutboxRecoverRow(row))
			}
			if len(rows) < recoverBatch {
				break
			}
		}
	}
	return out, errors.Join(errs...)
}

// purgeScopes is purgePublished on Citus: the scopes with events published
// before cutoff (OutboxPurgeScopes, lock-free, on one connection per worker
// node as the claim's read), then each purged on its node (OutboxPurgeScope)
// in batches of size, until no scope has any left.
func purgeScopes(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, size int, progress func(int64)) (int64, error) {
	q := db.New(pool)
	var total int64
	for {
		scopes, err := db.New(pipetx.FanOut{Pool: pool}).OutboxPurgeScopes(ctx, db.OutboxPurgeScopesParams{Cutoff: cutoff, MaxScopes: claimScopesMax})
		if err != nil {
			return total, dbError("outbox purge: listing the scopes with published events", err)
		}
		if len(scopes) == 0 {
			return total, nil
		}
		before := total
		for _, scope := range scopes {
			for {
				n, err := q.OutboxPurgeScope(ctx, db.OutboxPurgeScopeParams{ScopeID: scope, Cutoff: cutoff, MaxCount: int32(size)})
				if err != nil {
					return total, dbError(fmt.Sprintf("outbox purge (scope %q)", scope), err)
				}
				total += n
				if n > 0 && progress != nil {
					progress(total)
				}
				if n < int64(size) {
					break
				}
			}
		}
		if total == before { // what is left is locked by another purge
			return total, nil
		}
	}
}
