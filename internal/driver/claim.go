package driver

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/pipetx"
)

// ClaimerConfig is what a worker's claims need.
type ClaimerConfig struct {
	// Consumers are the consumers the worker owns.
	Consumers []string
	// Lease is how long a claim holds its receipts.
	Lease time.Duration
	// Listed, when set, sees the scope count of each read of the scopes
	// with due work (Citus; tests).
	Listed func(scopes int)
	// Local claims from the shards of the node the connections run on
	// (Citus, sessions on a worker node), not from every shard.
	Local bool
}

// Claimer claims due receipts for one worker, serving the scopes with due
// work in turns. Only one goroutine claims at a time.
type Claimer interface {
	// Claim claims up to n due receipts on conn, at most scopes scopes,
	// each with an equal share, and reports whether more are probably due.
	// Rows returned with an error are committed.
	Claim(ctx context.Context, conn *pgxpool.Conn, scopes, n int) (rows []db.ReceiptClaimScopeRow, more bool, err error)
	// Woke records a wake-up at t (a notification, a recovery): the next
	// claim that comes back short reads the scopes with due work again if
	// it served scopes listed before t. Safe to call at any time.
	Woke(t time.Time)
}

// claimWalk bounds the scopes one claim's walk visits per consumer, due or
// not (a scope whose receipts all wait for a retry is visited and skipped).
const claimWalk = 1_000

func (postgres) NewClaimer(cfg ClaimerConfig) Claimer { return &turns{cfg: cfg} }

// turns is the claim on one server: one statement serves up to scopes
// scopes with due work after the cursor, going round to the first scope when
// those after it run out, each with an equal share of n (ReceiptClaim), and
// the cursor moves past the last scope served.
type turns struct {
	cfg    ClaimerConfig
	cursor scopeCursor // where the next claim's turn begins: the last scope served
}

type scopeCursor struct{ kind, id string }

// Claim reports more when a scope filled its share or the turn served as
// many scopes as it may.
func (t *turns) Claim(ctx context.Context, conn *pgxpool.Conn, scopes, n int) (rows []db.ReceiptClaimScopeRow, more bool, err error) {
	from := t.cursor
	got, err := db.New(pipetx.Async{Conn: conn.Conn(), GenericPlan: true}).ReceiptClaim(ctx, db.ReceiptClaimParams{
		Consumers:      t.cfg.Consumers,
		AfterScopeKind: from.kind,
		AfterScopeID:   from.id,
		MaxWalk:        claimWalk,
		MaxScopes:      int32(scopes),
		MaxCount:       int32(n),
		ClaimToken:     inboxtype.New(), // fences together with each receipt's ID
		LeaseMs:        t.cfg.Lease.Milliseconds(),
	})
	if err != nil || len(got) == 0 {
		return nil, false, err
	}
	// The next turn begins after the last scope served in walk order: the
	// greatest one, or when the walk wrapped past the end, the greatest of
	// those at or before the cursor.
	perScope := map[scopeCursor]int32{}
	var last, wrapped scopeCursor
	rows = make([]db.ReceiptClaimScopeRow, len(got))
	for i, r := range got {
		rows[i] = db.ReceiptClaimScopeRow{
			ID: r.ID, ClaimToken: r.ClaimToken, ScopeKind: r.ScopeKind, ScopeID: r.ScopeID,
			Source: r.Source, Consumer: r.Consumer, MessageID: r.MessageID, EventType: r.EventType,
			SchemaVersion: r.SchemaVersion, Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, CreatedAt: r.CreatedAt,
		}
		c := scopeCursor{r.ScopeKind, r.ScopeID}
		perScope[c]++
		if perScope[c] >= r.Share {
			more = true
		}
		if !c.after(from) {
			wrapped = later(wrapped, c)
		}
		last = later(last, c)
	}
	if wrapped != (scopeCursor{}) {
		last = wrapped
	}
	t.cursor = last
	// Serving as many scopes as it may, the turn may have left others with
	// due work, even when every scope it served ran short of its share.
	return rows, more || len(rows) == n || len(perScope) >= scopes, nil
}

// Woke does nothing: every claim walks the due index afresh.
func (t *turns) Woke(time.Time) {}

// after reports whether c comes after o in the due index's scope order.
func (c scopeCursor) after(o scopeCursor) bool {
	return c.kind > o.kind || (c.kind == o.kind && c.id > o.id)
}

func later(a, b scopeCursor) scopeCursor {
	if b.after(a) {
		return b
	}
	return a
}
