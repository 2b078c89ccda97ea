package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/citusnode"
	"github.com/pginbox/pginbox/internal/pipetx"
	"github.com/pginbox/pginbox/internal/scopelisting"
)

// layout records whether pginbox's tables are distributed by Citus, read
// once from the catalog. A claim on one server is one statement across
// scopes; on Citus no statement may lock rows on several shards, so the
// claim lists the scopes with due work first (claimScopes).
type layout struct {
	mu          sync.Mutex
	known       bool
	distributed bool
	// log gets citusnode's warning for a session on a node that holds
	// shards; nil for none.
	log *slog.Logger
}

// The catalog probes: is Citus there, and are pginbox's tables distributed.
const (
	citusProbe       = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')`
	distributedProbe = `SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'pginbox_work'::regclass)`
)

// get returns whether the tables are distributed, asking q the first time.
// On a node that holds shards it logs citusnode's warning then.
func (l *layout) get(ctx context.Context, q db.DBTX) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.known {
		return l.distributed, nil
	}
	key, named := layoutKeyOf(q)
	var d dbLayout
	found := false
	if named {
		var v any
		if v, found = scopeLayouts.Load(key); found {
			d = v.(dbLayout)
		}
	}
	if !found {
		var err error
		if d, err = readLayout(ctx, q); err != nil {
			return false, err
		}
		if named {
			scopeLayouts.Store(key, d)
		}
	}
	l.known, l.distributed = true, d.distributed
	if d.localShards && l.log != nil {
		citusnode.Warn(ctx, l.log)
	}
	return l.distributed, nil
}

// dbLayout is what the catalog says about a database and the node a
// session runs on.
type dbLayout struct {
	distributed bool // pginbox's tables are distributed by Citus
	localShards bool // and this node holds shards of them
}

func readLayout(ctx context.Context, q db.DBTX) (dbLayout, error) {
	var d dbLayout
	var citus bool
	if err := q.QueryRow(ctx, citusProbe).Scan(&citus); err != nil || !citus {
		return d, err
	}
	err := q.QueryRow(ctx, distributedProbe).Scan(&d.distributed)
	if err != nil || !d.distributed {
		return d, err
	}
	d.localShards, err = citusnode.HoldsShards(ctx, q, "pginbox_work")
	return d, err
}

// cached returns what get read, false before it did.
func (l *layout) cached() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.distributed
}

// distributed reports whether the tables are distributed, as the claims
// read it: every job comes from a claim, so its scope statements (ReceiptStart,
// ReceiptFail, the savepoint path's scope) need no catalog read.
func (w *Worker) distributed() bool { return w.layout.cached() }

// claimScopes is the claim on Citus: the scopes with due work of the owned
// consumers (ReceiptDueScopes, oldest due first), then per scope a claim of
// at most its fair share of n in a statement of its own, on the scope's node
// (ReceiptClaimScope); scopelisting.Claimer runs the rounds. The rows
// claimed before an error are returned with it: they are committed. more
// reports that more is probably due.
//
// The listing read groups every due row, so its cost grows with the
// backlog; the rounds after it reuse it for a few times its cost, at most
// most scopes each, in turns, dropping the scopes that ran short. A scope
// that became due since waits for the next read; a claim that comes back
// empty has read afresh (Drain stops on one).
//
// A worker node down fails the listing read (it reads every shard) and
// the claims of that node's scopes, not the others': the round then claims
// from the scopes listed recently and skips a scope whose claim fails, so
// the tenants of the nodes still up keep flowing. Its errors come back as
// one (the claim loop logs one such round per poll interval); a scope with
// due work that was never listed waits until discovery works again.
func (w *Worker) claimScopes(ctx context.Context, conn *pgxpool.Conn, most, n int) (_ []db.ReceiptClaimScopeRow, more bool, _ error) {
	r := w.rounds.Claim(ctx, scopelisting.Source[db.ReceiptDueScopesRow, db.ReceiptClaimScopeRow]{
		List: func(ctx context.Context, limit int) ([]db.ReceiptDueScopesRow, error) {
			return db.New(pipetx.Async{Conn: conn.Conn(), OneConnPerNode: true}).ReceiptDueScopes(ctx, db.ReceiptDueScopesParams{
				Consumers: w.owned, MaxScopes: int32(limit),
			})
		},
		// One statement outside a transaction: the node runs and commits it
		// alone. (pipetx.Async's setting would stay on the coordinator, and
		// its BEGIN and COMMIT would cost the node two commands more.)
		Claim: func(ctx context.Context, s db.ReceiptDueScopesRow, k int) ([]db.ReceiptClaimScopeRow, error) {
			return db.New(conn).ReceiptClaimScope(ctx, db.ReceiptClaimScopeParams{
				ScopeID:    s.ScopeID,
				ClaimToken: inboxtype.New(),
				LeaseMs:    w.cfg.Lease.Milliseconds(),
				Consumers:  w.owned,
				MaxCount:   int32(k),
			})
		},
		Fatal:  func(error) bool { return ctx.Err() != nil || conn.Conn().IsClosed() },
		Listed: w.hooks.listed,
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
		err = &partialClaimError{err}
	}
	return r.Rows, r.More, err
}

// partialClaimError is a claim round on Citus that failed in part (a worker
// node down: the discovery read, that node's scopes) while the other nodes
// answered its claims. The worker goes on claiming on notifications after
// it, as after a claim that worked; after a claim that got no answer at all
// it waits for its poll.
type partialClaimError struct{ err error }

func (e *partialClaimError) Error() string { return e.err.Error() }
func (e *partialClaimError) Unwrap() error { return e.err }
