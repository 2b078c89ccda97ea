package inbox

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/pipetx"
)

// claimWalk bounds the scopes one claim's walk visits per consumer, due or
// not (a scope whose receipts all wait for a retry is visited and skipped).
const claimWalk = 1_000

// claimCursor is where the next claim's turn begins: the last scope a claim
// served. Only the claim loop or Drain claims, never both at once.
type claimCursor struct{ kind, id string }

// claimTurns is the claim on one server: one statement serves up to
// ClaimScopes scopes with due work after the cursor, each with an equal share
// of n (ReceiptClaim), and the cursor moves past the last scope served. When
// nothing after the cursor is due, the turn starts over from the first scope.
// more reports that a scope filled its share.
func (w *Worker) claimTurns(ctx context.Context, conn *pgxpool.Conn, n int) (rows []db.ReceiptClaimScopeRow, more bool, err error) {
	for {
		var got []db.ReceiptClaimRow
		from := w.cursor
		got, err = db.New(pipetx.Async{Conn: conn.Conn()}).ReceiptClaim(ctx, db.ReceiptClaimParams{
			Consumers:      w.owned,
			AfterScopeKind: from.kind,
			AfterScopeID:   from.id,
			MaxWalk:        claimWalk,
			MaxScopes:      int32(w.cfg.ClaimScopes),
			MaxCount:       int32(n),
			ClaimToken:     inboxtype.New(), // fences together with each receipt's ID
			LeaseMs:        w.cfg.Lease.Milliseconds(),
		})
		if err != nil {
			return nil, false, err
		}
		if len(got) == 0 {
			w.cursor = claimCursor{}
			if from == (claimCursor{}) {
				return nil, false, nil
			}
			continue // the turn starts over
		}
		perScope := map[claimCursor]int32{}
		last := claimCursor{}
		rows = make([]db.ReceiptClaimScopeRow, len(got))
		for i, r := range got {
			rows[i] = scopeRow(r)
			c := claimCursor{r.ScopeKind, r.ScopeID}
			perScope[c]++
			if perScope[c] >= r.Share {
				more = true
			}
			if c.kind > last.kind || (c.kind == last.kind && c.id > last.id) {
				last = c
			}
		}
		w.cursor = last
		return rows, more || len(rows) == n, nil
	}
}
