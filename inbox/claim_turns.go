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

// claimShape returns how many scopes a claim of up to n receipts serves and
// how many it takes: each scope's share at least MessagesPerTx, so a slot's
// transaction (one scope, up to MessagesPerTx messages) can be full. With
// small shares a slot would start a transaction for the few messages of its
// scope (64 receipts over 16 scopes give 4 each), and a transaction costs
// about the same whatever it carries.
func (w *Worker) claimShape(n int) (scopes, count int) {
	per := w.cfg.MessagesPerTx
	scopes = w.cfg.ClaimScopes
	if n/per < scopes {
		scopes = max(1, n/per)
		if n >= per {
			n = scopes * per
		}
	}
	return scopes, n
}

// claimCursor is where the next claim's turn begins: the last scope a claim
// served. Only the claim loop or Drain claims, never both at once.
type claimCursor struct{ kind, id string }

// claimTurns is the claim on one server: one statement serves up to scopes
// scopes with due work after the cursor (claimShape), going round to the
// first scope when those after it run out, each with an equal share of n
// (ReceiptClaim), and the cursor moves past the last scope served. more
// reports that a scope filled its share or that the turn served as many
// scopes as it may.
func (w *Worker) claimTurns(ctx context.Context, conn *pgxpool.Conn, scopes, n int) (rows []db.ReceiptClaimScopeRow, more bool, err error) {
	from := w.cursor
	got, err := db.New(pipetx.Async{Conn: conn.Conn(), GenericPlan: true}).ReceiptClaim(ctx, db.ReceiptClaimParams{
		Consumers:      w.owned,
		AfterScopeKind: from.kind,
		AfterScopeID:   from.id,
		MaxWalk:        claimWalk,
		MaxScopes:      int32(scopes),
		MaxCount:       int32(n),
		ClaimToken:     inboxtype.New(), // fences together with each receipt's ID
		LeaseMs:        w.cfg.Lease.Milliseconds(),
	})
	if err != nil || len(got) == 0 {
		return nil, false, err
	}
	// The next turn begins after the last scope served in walk order: the
	// greatest one, or when the walk wrapped past the end, the greatest of
	// those at or before the cursor.
	perScope := map[claimCursor]int32{}
	var last, wrapped claimCursor
	rows = make([]db.ReceiptClaimScopeRow, len(got))
	for i, r := range got {
		rows[i] = scopeRow(r)
		c := claimCursor{r.ScopeKind, r.ScopeID}
		perScope[c]++
		if perScope[c] >= r.Share {
			more = true
		}
		if !c.after(from) {
			wrapped = later(wrapped, c)
		}
		last = later(last, c)
	}
	if wrapped != (claimCursor{}) {
		last = wrapped
	}
	w.cursor = last
	// Serving as many scopes as it may, the turn may have left others with
	// due work, even when every scope it served ran short of its share.
	return rows, more || len(rows) == n || len(perScope) >= scopes, nil
}

// after reports whether c comes after o in the due index's scope order.
func (c claimCursor) after(o claimCursor) bool {
	return c.kind > o.kind || (c.kind == o.kind && c.id > o.id)
}

func later(a, b claimCursor) claimCursor {
	if b.after(a) {
		return b
	}
	return a
}
