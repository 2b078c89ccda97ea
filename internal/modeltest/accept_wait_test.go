package modeltest

import (
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
)

// A redelivery of a message whose handler's transaction is running waits for
// that transaction: the identity's unique index check waits for the
// transaction that updated the original receipt (ReceiptStart marks it
// COMPLETED, uncommitted). The model's accept waits the same way; the model-
// based test found it (a duplicate accept ran into its statement timeout).
func TestDuplicateAcceptWaitsForRunningHandler(t *testing.T) {
	pool := inboxtest.Pool(t, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["statement_timeout"] = "1s"
	})
	ctx := t.Context()
	q := db.New(pool)
	fp := sha256.Sum256([]byte("m1"))
	payload := `{}`
	accept := func() error {
		_, err := q.ReceiptAccept(ctx, db.ReceiptAcceptParams{
			ID: inboxtype.New(), ScopeKind: "tenant", ScopeID: "s1", Source: "model", Consumer: "c",
			MessageID: "m1", EventType: "e", SchemaVersion: 1, Fingerprint: fp[:], Payload: &payload,
			Metadata: "{}", MaxAttempts: 2,
		})
		return err
	}
	if err := accept(); err != nil {
		t.Fatal(err)
	}
	tok := inboxtype.New()
	claimed, err := q.ReceiptClaim(ctx, db.ReceiptClaimParams{Consumers: []string{"c"}, MaxWalk: 1, MaxScopes: 1, MaxCount: 1, ClaimToken: tok, LeaseMs: 60_000})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	started, err := db.New(tx).ReceiptStart(ctx, db.ReceiptStartParams{ScopeID: "s1", Ids: []string{claimed[0].ID.UUIDString()}, Tokens: []string{tok.UUIDString()}})
	if err != nil || len(started) != 1 {
		t.Fatalf("start: %v %v", started, err)
	}
	var pgErr *pgconn.PgError
	if err := accept(); !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("duplicate accept while the handler runs: %v, want it to wait into its statement timeout (57014)", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := accept(); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("duplicate accept after the handler ended: %v, want a duplicate (no row)", err)
	}
}
