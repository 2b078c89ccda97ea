package historycheck

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
)

// historySeconds is how long a history runs: HISTORY_SECONDS, or 5.
func historySeconds() int {
	seconds := 5
	if s := os.Getenv("HISTORY_SECONDS"); s != "" {
		fmt.Sscan(s, &seconds)
	}
	return seconds
}

// seedReceipts accepts one global receipt per consumer (straight through the
// statement, to start from known rows) and returns their IDs with the
// operator's view.
func seedReceipts(t *testing.T, ctx context.Context, pool *pgxpool.Pool, consumers []string, maxAttempts int32) ([]inbox.ID, *inbox.AdminView) {
	t.Helper()
	ids := make([]inbox.ID, len(consumers))
	payload := `{"n":1}`
	for i, c := range consumers {
		ids[i] = inboxtype.New()
		fp := sha256.Sum256([]byte{byte(i)})
		if _, err := db.New(pool).ReceiptAccept(ctx, db.ReceiptAcceptParams{
			ID: ids[i], ScopeKind: "global", Source: "history", Consumer: c, MessageID: fmt.Sprint(i),
			EventType: "e", SchemaVersion: 1, Fingerprint: fp[:], Payload: &payload, Metadata: "{}", MaxAttempts: maxAttempts,
		}); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return ids, admin.Operator()
}
