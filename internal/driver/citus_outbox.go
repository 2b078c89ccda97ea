package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/pipetx"
	"github.com/pginbox/pginbox/internal/scopelisting"
)

// citusOutbox runs the outbox per scope: every statement names the scope so
// that it runs on the scope's node, after a lock-free read of every shard
// where a statement would span scopes.
type citusOutbox struct{}

// Insert reads the transaction's scope on the coordinator
// (OutboxEmitScope), takes the key lock on the scope's node
// (OutboxKeyLockScope: an advisory lock there, since locks are per node),
// then inserts the row there. Per-key ordering holds per (scope, key).
func (citusOutbox) Insert(ctx context.Context, q *db.Queries, p db.OutboxEventInsertParams) error {
	tenant, err := q.OutboxEmitScope(ctx)
	if err != nil {
		return err
	}
	kind := "tenant"
	if tenant == "" {
		kind = "global"
	}
	if p.OrderingKey != "" {
		if _, err := q.OutboxKeyLockScope(ctx, db.OutboxKeyLockScopeParams{ScopeID: tenant, OrderingKey: p.OrderingKey}); err != nil {
			return err
		}
	}
	receipt := p.ReceiptID
	if p.ReceiptTenant != tenant { // emitted through a transaction of another scope: not linked
		receipt = inboxtype.ID{}
	}
	_, err = q.OutboxEventInsertScope(ctx, db.OutboxEventInsertScopeParams{
		ID: p.ID, ScopeKind: kind, ScopeID: tenant, Source: p.Source, Destination: p.Destination,
		OrderingKey: p.OrderingKey, EventType: p.EventType, SchemaVersion: p.SchemaVersion,
		Payload: p.Payload, Metadata: p.Metadata, ReceiptID: receipt,
	})
	return err
}

func (citusOutbox) NewClaimer(cfg RelayClaimerConfig) RelayClaimer { return &outboxRounds{cfg: cfg} }

// outboxRounds is the relay's claim on Citus: the scopes with due events,
// oldest due first (OutboxDueScopes, a lock-free read of every shard), then
// per scope a claim of at most its fair share of n in a statement of its own
// on the scope's node (OutboxClaimScope); scopelisting.Claimer runs the
// rounds and reuses the read for a few times its cost. A scope whose claim
// fails (its node down) is skipped; the rows claimed before are returned
// with the error: they are committed. A worker node down fails the read;
// the rounds then claim from every scope listed recently, in turns, so the
// other nodes' events keep flowing (a scope never listed waits until
// discovery works again).
type outboxRounds struct {
	cfg    RelayClaimerConfig
	rounds scopelisting.Claimer[string, db.OutboxClaimScopeRow]
}

func (c *outboxRounds) Claim(ctx context.Context, pool *pgxpool.Pool, n int) ([]db.OutboxClaimRow, error) {
	round := c.rounds.Claim(ctx, scopelisting.Source[string, db.OutboxClaimScopeRow]{
		List: func(ctx context.Context, limit int) ([]string, error) {
			rows, err := db.New(pipetx.FanOut{Pool: pool}).OutboxDueScopes(ctx, int32(limit))
			scopes := make([]string, len(rows))
			for i, r := range rows {
				scopes[i] = r.ScopeID
			}
			return scopes, err
		},
		// One statement outside a transaction: the node runs and commits it
		// alone (an asynchronous commit's setting would stay on the
		// coordinator, and its BEGIN and COMMIT would cost the node two
		// commands more).
		Claim: func(ctx context.Context, scope string, k int) ([]db.OutboxClaimScopeRow, error) {
			return db.New(pool).OutboxClaimScope(ctx, db.OutboxClaimScopeParams{
				ScopeID:    scope,
				ClaimToken: inboxtype.New(),
				LeaseMs:    c.cfg.Lease.Milliseconds(),
				MaxCount:   int32(k),
			})
		},
		Fatal:  func(error) bool { return ctx.Err() != nil },
		Listed: c.cfg.Listed,
	}, outboxScopesMax, n)
	var errs []error
	if round.ListErr != nil {
		if round.Fallback == 0 {
			return nil, fmt.Errorf("listing the scopes with due events: %w", round.ListErr)
		}
		errs = append(errs, fmt.Errorf("listing the scopes with due events (claiming from %d scopes seen recently instead): %w", round.Fallback, round.ListErr))
	}
	for _, f := range round.Failed {
		errs = append(errs, fmt.Errorf("scope %q skipped: %w", f.Scope, f.Err))
	}
	if round.Fatal != nil {
		errs = append(errs, round.Fatal)
	}
	out := make([]db.OutboxClaimRow, len(round.Rows))
	for i, row := range round.Rows {
		out[i] = db.OutboxClaimRow(row)
	}
	return out, errors.Join(errs...)
}

// Woke has the next short round read again when it served a listing read
// before t.
func (c *outboxRounds) Woke(t time.Time) { c.rounds.Woke(t) }

// Settle runs per scope: the routed mark, fail and release statements.
// Failure times come from the relay's clock (Citus refuses a time computed
// from a column in a routed UPDATE).
func (citusOutbox) Settle(ctx context.Context, pool *pgxpool.Pool, s Settlement) (Settled, error) {
	q := db.New(pool)
	type scoped struct {
		published, released []Fence
		failed              []EventFailure
	}
	var order []string
	by := map[string]*scoped{}
	get := func(scope string) *scoped {
		if by[scope] == nil {
			by[scope] = &scoped{}
			order = append(order, scope)
		}
		return by[scope]
	}
	for _, f := range s.Published {
		get(f.ScopeID).published = append(get(f.ScopeID).published, f)
	}
	for _, f := range s.Failed {
		get(f.ScopeID).failed = append(get(f.ScopeID).failed, f)
	}
	for _, f := range s.Released {
		get(f.ScopeID).released = append(get(f.ScopeID).released, f)
	}
	var out Settled
	var errs []error
	now := time.Now()
	for _, scope := range order {
		sc := by[scope]
		if len(sc.published) > 0 {
			ids, tokens := fences(sc.published)
			marked, err := q.OutboxMarkPublishedScope(ctx, db.OutboxMarkPublishedScopeParams{ScopeID: scope, Ids: ids, Tokens: tokens})
			if err != nil {
				errs = append(errs, fmt.Errorf("mark published: %w", err))
			} else {
				out.Marked += len(marked)
				out.Lost += len(ids) - len(marked)
			}
		}
		if len(sc.failed) > 0 {
			p := db.OutboxFailScopeParams{ScopeID: scope, MaxAttempts: s.MaxAttempts}
			for _, f := range sc.failed {
				p.Ids = append(p.Ids, f.ID)
				p.Tokens = append(p.Tokens, f.Token)
				p.Errors = append(p.Errors, f.Error)
				p.AvailableAt = append(p.AvailableAt, now.Add(f.Delay))
				p.Dead = append(p.Dead, f.Dead)
			}
			rows, err := q.OutboxFailScope(ctx, p)
			if err != nil {
				errs = append(errs, fmt.Errorf("recording the failures: %w", err))
			}
			for _, row := range rows {
				out.Failed = append(out.Failed, db.OutboxFailRow(row))
			}
		}
		if len(sc.released) > 0 {
			ids, tokens := fences(sc.released)
			if _, err := q.OutboxReleaseScope(ctx, db.OutboxReleaseScopeParams{ScopeID: scope, Ids: ids, Tokens: tokens}); err != nil {
				errs = append(errs, fmt.Errorf("release: %w", err))
			}
		}
	}
	return out, errors.Join(errs...)
}

// Recover lists the scopes with expired leases (OutboxExpiredScopes,
// lock-free), then recovers each on its node (OutboxRecoverScope) until a
// short batch.
func (citusOutbox) Recover(ctx context.Context, pool *pgxpool.Pool, maxAttempts int32) ([]db.OutboxRecoverRow, error) {
	q := db.New(pool)
	scopes, err := db.New(pipetx.FanOut{Pool: pool}).OutboxExpiredScopes(ctx, outboxScopesMax)
	if err != nil {
		return nil, fmt.Errorf("listing the scopes with expired leases: %w", err)
	}
	var out []db.OutboxRecoverRow
	var errs []error
	for _, scope := range scopes {
		for {
			rows, err := q.OutboxRecoverScope(ctx, db.OutboxRecoverScopeParams{
				ScopeID: scope, MaxAttempts: maxAttempts, MaxCount: recoverBatch,
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("recover (scope %q): %w", scope, err))
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

// Purge lists the scopes with events published before cutoff
// (OutboxPurgeScopes, lock-free, on one connection per worker node as the
// claim's read), then purges each on its node (OutboxPurgeScope) in batches
// of size, until no scope has any left.
func (citusOutbox) Purge(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, size int, progress func(int64)) (int64, error) {
	q := db.New(pool)
	var total int64
	for {
		scopes, err := db.New(pipetx.FanOut{Pool: pool}).OutboxPurgeScopes(ctx, db.OutboxPurgeScopesParams{Cutoff: cutoff, MaxScopes: outboxScopesMax})
		if err != nil {
			return total, fmt.Errorf("listing the scopes with published events: %w", err)
		}
		if len(scopes) == 0 {
			return total, nil
		}
		before := total
		for _, scope := range scopes {
			for {
				n, err := q.OutboxPurgeScope(ctx, db.OutboxPurgeScopeParams{ScopeID: scope, Cutoff: cutoff, MaxCount: int32(size)})
				if err != nil {
					return total, fmt.Errorf("purge (scope %q): %w", scope, err)
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
