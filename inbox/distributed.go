package inbox

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
)

// layout records whether pginbox's tables are distributed by Citus, read
// once from the catalog. A claim on one server is one statement across
// scopes; on Citus no statement may lock rows on several shards, so the
// claim lists the scopes with due work first (claimScopes).
type layout struct {
	mu          sync.Mutex
	known       bool
	distributed bool
}

// The catalog probes: is Citus there, and are pginbox's tables distributed.
const (
	citusProbe       = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')`
	distributedProbe = `SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'pginbox_work'::regclass)`
)

// get returns whether the tables are distributed, asking q the first time.
func (l *layout) get(ctx context.Context, q db.DBTX) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.known {
		return l.distributed, nil
	}
	var citus bool
	if err := q.QueryRow(ctx, citusProbe).Scan(&citus); err != nil {
		return false, err
	}
	if citus {
		if err := q.QueryRow(ctx, distributedProbe).Scan(&l.distributed); err != nil {
			return false, err
		}
	}
	l.known = true
	return l.distributed, nil
}

// claimScopes is the claim on Citus: the scopes with due work of the owned
// consumers (ReceiptDueScopes, oldest due first, at most ClaimScopes), then
// per scope a claim of at most its fair share of n in a short transaction of
// its own, on the scope's node (ReceiptClaimScope). Scopes that filled their
// share may have more: the round repeats over them while n has room. The
// rows claimed before an error are returned with it: they are committed.
func (w *Worker) claimScopes(ctx context.Context, conn *pgxpool.Conn, n int) ([]db.ReceiptClaimRow, error) {
	scopes, err := db.New(conn).ReceiptDueScopes(ctx, db.ReceiptDueScopesParams{
		Consumers: w.owned, MaxScopes: int32(w.cfg.ClaimScopes),
	})
	if err != nil {
		return nil, err
	}
	var out []db.ReceiptClaimRow
	for len(scopes) > 0 && len(out) < n {
		share := max(1, (n-len(out)+len(scopes)-1)/len(scopes))
		var more []db.ReceiptDueScopesRow
		for _, s := range scopes {
			k := min(share, n-len(out))
			if k <= 0 {
				break
			}
			var rows []db.ReceiptClaimScopeRow
			err := pgx.BeginTxFunc(ctx, conn, asyncCommit, func(tx pgx.Tx) error {
				var err error
				rows, err = db.New(tx).ReceiptClaimScope(ctx, db.ReceiptClaimScopeParams{
					ScopeID:    s.ScopeID,
					ClaimToken: inboxtype.New(),
					LeaseMs:    w.cfg.Lease.Milliseconds(),
					Consumers:  w.owned,
					MaxCount:   int32(k),
				})
				return err
			})
			if err != nil {
				return out, err
			}
			for _, r := range rows {
				out = append(out, db.ReceiptClaimRow(r))
			}
			if len(rows) == k {
				more = append(more, s)
			}
		}
		scopes = more
	}
	return out, nil
}
