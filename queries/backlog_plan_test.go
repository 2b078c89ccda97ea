package queries_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
)

// The claim on one server stays index-driven with a backlog of a million due
// receipts, most of them one tenant's: it walks the due index scope by scope
// and reads a few hundred pages, not the backlog. EXPLAIN ANALYZE runs the
// claim in a transaction that is rolled back.
func TestClaimPlanWithAMillionDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, inboxtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// 990,000 receipts of one tenant and 100 each of 100 others.
	const seed = `
INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
    event_type, schema_version, fingerprint, payload, created_at)
SELECT gen_random_uuid(), 'tenant', CASE WHEN g <= 990000 THEN 'hot' ELSE 'cold-' || lpad((g % 100)::text, 3, '0') END,
    'bench', 'orders', 'm-' || g, 'order.created', 1, sha256(g::text::bytea), '{}',
    now() - interval '1 hour' + g * interval '1 millisecond'
FROM generate_series(1, 1000000) g;
INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts, available_at)
SELECT id, scope_kind, scope_id, consumer, max_attempts, created_at FROM pginbox_receipts;
ANALYZE pginbox_receipts, pginbox_work`
	if _, err := conn.Exec(ctx, seed); err != nil {
		t.Fatal(err)
	}

	var claim query
	for _, q := range loadQueries(t) {
		if q.name == "ReceiptClaim" {
			claim = q
		}
	}
	if claim.sql == "" {
		t.Fatal("ReceiptClaim not found in queries/")
	}
	args := func(afterID string, maxScopes int) []any {
		byName := map[string]any{
			"consumers": []string{"orders"}, "after_scope_kind": "tenant", "after_scope_id": afterID,
			"max_walk": 1000, "max_scopes": maxScopes, "max_count": 64,
			"claim_token": inboxtype.New().UUIDString(), "lease_ms": 30000,
		}
		out := make([]any, len(claim.params))
		for i, p := range claim.params {
			v, ok := byName[p]
			if !ok {
				t.Fatalf("ReceiptClaim has a parameter %q this test does not set", p)
			}
			out[i] = v
		}
		return out
	}
	hit := regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?`)
	// The last case goes round all 101 scopes: the walk after the cursor, then
	// from the first scope up to it.
	for _, c := range []struct {
		after     string
		maxScopes int
	}{{"", 16}, {"cold-050", 16}, {"hot", 16}, {"cold-050", 200}} {
		after := c.after
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) "+strings.TrimSpace(stripComments(claim.sql)), args(after, c.maxScopes)...)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		tx.Rollback(ctx)
		plan := strings.Join(lines, "\n")
		if strings.Contains(plan, "Seq Scan on pginbox_work") || !strings.Contains(plan, "pginbox_work_due") {
			t.Fatalf("after %q: the claim does not walk the due index:\n%s", after, plan)
		}
		m := hit.FindStringSubmatch(plan) // the top node's: the whole statement
		if m == nil {
			t.Fatalf("after %q: no buffer counts in the plan:\n%s", after, plan)
		}
		pages, _ := strconv.Atoi(m[1])
		if m[2] != "" {
			read, _ := strconv.Atoi(m[2])
			pages += read
		}
		claimed := regexp.MustCompile(`Update on pginbox_work.*\n.*\n?`).FindString(plan)
		t.Logf("after %q: %d pages for the claim of 64 (up to %d scopes) from 1,000,000 due %s", after, pages, c.maxScopes, strings.TrimSpace(claimed))
		if pages > 5000 {
			t.Fatalf("after %q: the claim read %d pages with a million due: want a walk of the index, not of the backlog:\n%s", after, pages, plan)
		}
	}
}
