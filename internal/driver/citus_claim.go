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

func (citus) NewClaimer(cfg ClaimerConfig) Claimer { return &scopeRounds{cfg: cfg} }

// scopeRounds is the claim on Citus: the scopes with due work of the owned
// consumers (ReceiptDueScopes, oldest due first), then per scope a claim of
// at most its fair share of n in a statement of its own, on the scope's
// node (ReceiptClaimScope); scopelisting.Claimer runs the rounds.
//
// The listing read groups every due row, so its cost grows with the
// backlog; the rounds after it reuse it for a few times its cost, in turns,
// dropping the scopes that ran short. A scope that became due since waits
// for the next read; a claim that comes back empty has read afresh (Drain
// stops on one).
//
// A worker node down fails the listing read (it reads every shard) and the
// claims of that node's scopes, not the others': the rounds then claim from
// every scope listed recently, in turns, and skip a scope whose claim fails,
// so the tenants of the nodes still up keep flowing. Their errors come back
// as one PartialClaimError (the claim loop logs one such round per poll
// interval); a scope with due work that was never listed waits until
// discovery works again.
type scopeRounds struct {
	cfg    ClaimerConfig
	rounds scopelisting.Claimer[DueScope, db.ReceiptClaimScopeRow]
}

// DueScope is a scope a discovery read listed.
type DueScope struct {
	Kind, ID string // the scope's kind and tenant ID
}

func (c *scopeRounds) Claim(ctx context.Context, conn *pgxpool.Conn, most, n int) (_ []db.ReceiptClaimScopeRow, more bool, _ error) {
	r := c.rounds.Claim(ctx, scopelisting.Source[DueScope, db.ReceiptClaimScopeRow]{
		List: func(ctx context.Context, limit int) ([]DueScope, error) {
			if c.cfg.Local {
				rows, err := db.New(conn).ReceiptDueScopesLocal(ctx, db.ReceiptDueScopesLocalParams{
					Consumers: c.cfg.Consumers, MaxScopes: int32(limit),
				})
				scopes := make([]DueScope, len(rows))
				for i, r := range rows {
					scopes[i] = DueScope{r.ScopeKind, r.ScopeID}
				}
				return scopes, err
			}
			rows, err := db.New(pipetx.Async{Conn: conn.Conn(), OneConnPerNode: true}).ReceiptDueScopes(ctx, db.ReceiptDueScopesParams{
				Consumers: c.cfg.Consumers, MaxScopes: int32(limit),
			})
			scopes := make([]DueScope, len(rows))
			for i, r := range rows {
				scopes[i] = DueScope{r.ScopeKind, r.ScopeID}
			}
			return scopes, err
		},
		// One statement outside a transaction: the node runs and commits it
		// alone. (pipetx.Async's setting would stay on the coordinator, and
		// its BEGIN and COMMIT would cost the node two commands more.)
		Claim: func(ctx context.Context, s DueScope, k int) ([]db.ReceiptClaimScopeRow, error) {
			return db.New(conn).ReceiptClaimScope(ctx, db.ReceiptClaimScopeParams{
				ScopeID:    s.ID,
				ClaimToken: inboxtype.New(),
				LeaseMs:    c.cfg.Lease.Milliseconds(),
				Consumers:  c.cfg.Consumers,
				MaxCount:   int32(k),
			})
		},
		Fatal:  func(error) bool { return ctx.Err() != nil || conn.Conn().IsClosed() },
		Listed: c.cfg.Listed,
	}, most, n)
	var errs []error
	if r.ListErr != nil {
		if r.Fallback == 0 {
			return nil, false, r.ListErr
		}
		errs = append(errs, fmt.Errorf("listing the scopes with due work (claiming from %d scopes seen recently instead): %w", r.Fallback, r.ListErr))
	}
	if r.Fatal != nil {
		return r.Rows, false, errors.Join(append(errs, r.Fatal)...)
	}
	if len(r.Failed) > 0 {
		errs = append(errs, fmt.Errorf("claiming from %d scopes (skipped, the others claimed): %w", len(r.Failed), r.Failed[0].Err))
	}
	err := errors.Join(errs...)
	if err != nil && r.Answered > 0 {
		err = &PartialClaimError{err}
	}
	return r.Rows, r.More, err
}

// Woke has the next short round read again when it served a listing read
// before t.
func (c *scopeRounds) Woke(t time.Time) { c.rounds.Woke(t) }

// PartialClaimError is a claim round that failed in part (Citus, a worker
// node down: the discovery read, that node's scopes) while other nodes
// answered its claims. The worker goes on claiming on notifications after
// it, as after a claim that worked; after a claim that got no answer at all
// it waits for its poll.
type PartialClaimError struct {
	Err error // the failures, joined
}

func (e *PartialClaimError) Error() string { return e.Err.Error() }
func (e *PartialClaimError) Unwrap() error { return e.Err }
