package inbox_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
)

// seedDue writes n due order.created receipts for orders.projection.v1 with
// COPY, spread over tenants tenant-00.., as Accept would have left them: a
// deep backlog in seconds.
func seedDue(t testing.TB, pool *pgxpool.Pool, n, tenants int) {
	t.Helper()
	const chunk = 50_000
	for start := 0; start < n; start += chunk {
		size := min(chunk, n-start)
		receipts := make([][]any, size)
		work := make([][]any, size)
		for i := range size {
			id := inboxtype.New()
			p := fmt.Sprintf(`{"n":%d}`, start+i)
			fp := inbox.Fingerprint("order.created", 1, []byte(p))
			scope := fmt.Sprintf("tenant-%02d", (start+i)%tenants)
			receipts[i] = []any{id, "tenant", scope, "orders-service", "orders.projection.v1", fmt.Sprint("seeded-", start+i),
				"order.created", int32(1), fp[:], p, "{}", "PENDING", int32(10)}
			work[i] = []any{id, "tenant", scope, "orders.projection.v1", "PENDING", int32(10)}
		}
		if _, err := pool.CopyFrom(t.Context(), pgx.Identifier{"pginbox_receipts"},
			[]string{"id", "scope_kind", "scope_id", "source", "consumer", "message_id",
				"event_type", "schema_version", "fingerprint", "payload", "metadata", "status", "max_attempts"},
			pgx.CopyFromRows(receipts)); err != nil {
			t.Fatalf("seeding %d receipts: %v", size, err)
		}
		if _, err := pool.CopyFrom(t.Context(), pgx.Identifier{"pginbox_work"},
			[]string{"receipt_id", "scope_kind", "scope_id", "consumer", "status", "max_attempts"},
			pgx.CopyFromRows(work)); err != nil {
			t.Fatalf("seeding %d queue rows: %v", size, err)
		}
	}
	if _, err := pool.Exec(t.Context(), "VACUUM ANALYZE pginbox_work"); err != nil {
		t.Fatal(err)
	}
}
