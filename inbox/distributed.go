package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
// at most its fair share of n in a short transaction of its own, on the
// scope's node (ReceiptClaimScope). Scopes that filled their share may have
// more: the round repeats over them while n has room. The rows claimed
// before an error are returned with it: they are committed. more reports
// that more is probably due: the round filled n, or it claimed and scopes
// remain that it did not serve or that filled their share.
//
// The listing read groups every due row, so its cost grows with the
// backlog; the rounds after it reuse it for a few times its cost
// (scopelisting), at most most scopes each, in turns, dropping the scopes
// that ran short. A scope that became due since waits for the next read; a
// round that reused the listing and claimed nothing reads at once, so a
// claim that comes back empty has read afresh (Drain stops on one).
//
// A worker node down fails the listing read (it reads every shard) and
// the claims of that node's scopes, not the others': the round then claims
// from the scopes discovery listed recently (recentscopes) and skips a scope
// whose claim fails, so the tenants of the nodes still up keep flowing. Its
// errors come back as one (the claim loop logs one such round per poll
// interval); a scope with due work
// that was never listed waits until discovery works again.
func (w *Worker) claimScopes(ctx context.Context, conn *pgxpool.Conn, most, n int) (_ []db.ReceiptClaimScopeRow, more bool, _ error) {
	reuse := w.listing.Fresh(time.Now())
	rows, more, err := w.claimRound(ctx, conn, most, n, reuse)
	if reuse && len(rows) == 0 && err == nil {
		// The reused listing's scopes ran dry; others may be due since.
		return w.claimRound(ctx, conn, most, n, false)
	}
	return rows, more, err
}

// claimRound is one round of claimScopes, from the listing when reuse is
// set, from a new read otherwise.
func (w *Worker) claimRound(ctx context.Context, conn *pgxpool.Conn, most, n int, reuse bool) (_ []db.ReceiptClaimScopeRow, more bool, _ error) {
	var errs []error
	var scopes []db.ReceiptDueScopesRow
	listed := false // scopes come from the listing, not the fallback
	listedAll := false
	if reuse {
		scopes, listedAll = w.listing.Turn(most)
		listed = true
	} else {
		start := time.Now()
		limit := most * scopelisting.Wider
		all, err := db.New(pipetx.Async{Conn: conn.Conn(), OneConnPerNode: true}).ReceiptDueScopes(ctx, db.ReceiptDueScopesParams{
			Consumers: w.owned, MaxScopes: int32(limit),
		})
		if err != nil {
			scopes = w.recent.Recent(most)
			if len(scopes) == 0 {
				return nil, false, err
			}
			errs = append(errs, fmt.Errorf("listing the scopes with due work (claiming from %d scopes seen recently instead): %w", len(scopes), err))
		} else {
			w.recent.Saw(all, time.Now(), limit)
			w.listing.Set(all, len(all) == limit, start, time.Since(start))
			if w.hooks.listed != nil {
				w.hooks.listed(len(all))
			}
			scopes, listedAll = w.listing.Turn(most)
			listed = true
		}
	}
	var out []db.ReceiptClaimScopeRow
	var short []db.ReceiptDueScopesRow
	failed, answered := 0, 0
	var claimErr error
	for len(scopes) > 0 && len(out) < n {
		share := max(1, (n-len(out)+len(scopes)-1)/len(scopes))
		var filled []db.ReceiptDueScopesRow
		for _, s := range scopes {
			k := min(share, n-len(out))
			if k <= 0 {
				break
			}
			// One statement outside a transaction: the node runs and commits
			// it alone. (pipetx.Async's setting would stay on the coordinator,
			// and its BEGIN and COMMIT would cost the node two commands more.)
			rows, err := db.New(conn).ReceiptClaimScope(ctx, db.ReceiptClaimScopeParams{
				ScopeID:    s.ScopeID,
				ClaimToken: inboxtype.New(),
				LeaseMs:    w.cfg.Lease.Milliseconds(),
				Consumers:  w.owned,
				MaxCount:   int32(k),
			})
			if err != nil {
				if ctx.Err() != nil || conn.Conn().IsClosed() {
					return out, false, errors.Join(append(errs, err)...)
				}
				// Most likely the scope's node is down: the others may be up.
				failed++
				if claimErr == nil {
					claimErr = err
				}
				continue
			}
			answered++
			out = append(out, rows...)
			if len(rows) == k {
				filled = append(filled, s)
			} else {
				short = append(short, s)
			}
		}
		scopes = filled
	}
	if listed {
		w.listing.Short(short)
	}
	if claimErr != nil {
		errs = append(errs, fmt.Errorf("claiming from %d scopes (skipped, the others claimed): %w", failed, claimErr))
	}
	err := errors.Join(errs...)
	if err != nil && answered > 0 {
		err = &partialClaimError{err}
	}
	more = len(out) == n || (listed && len(out) > 0 && (listedAll || w.listing.Left()))
	return out, more, err
}

// partialClaimError is a claim round on Citus that failed in part (a worker
// node down: the discovery read, that node's scopes) while the other nodes
// answered its claims. The worker goes on claiming on notifications after
// it, as after a claim that worked; after a claim that got no answer at all
// it waits for its poll.
type partialClaimError struct{ err error }

func (e *partialClaimError) Error() string { return e.err.Error() }
func (e *partialClaimError) Unwrap() error { return e.err }
