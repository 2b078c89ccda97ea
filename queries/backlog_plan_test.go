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
	// 990,000 receipts of one tenant and 100 each of 100 others.
	checkClaimPlans(t, 1_000_000, 990_000, []claimCase{{"", 16, "auto"}, {"cold-050", 16, "auto"}, {"hot", 16, "auto"}, {"cold-050", 200, "auto"},
		{"", 16, "force_generic_plan"}, {"hot", 1, "force_generic_plan"}, {"cold-050", 200, "force_generic_plan"}})
}

// The worker runs the claim on a generic plan (pipetx.Async with
// GenericPlan). With a backlog of thousands in one scope, as in the bench's
// drain, a generic plan that joined the
// claimed rows would hash-join over a sequential scan of both tables (it
// did: 10 ms and a thousand pages per claim in the bench); the ID arrays keep
// it on the primary keys.
func TestClaimGenericPlanWithASmallBacklog(t *testing.T) {
	t.Parallel()
	checkClaimPlans(t, 20_000, 20_000, []claimCase{{"", 4, "force_generic_plan"}, {"hot", 1, "force_generic_plan"}})
}

// claimCase is one EXPLAIN of the claim: the cursor, the scopes it may serve
// and the plan_cache_mode (force_generic_plan: the plan the worker runs).
type claimCase struct {
	after     string
	maxScopes int
	mode      string
}

// checkClaimPlans seeds n due receipts (hot of them one tenant's, the rest
// over 100 others) and checks the claim's plan in each case: it walks the
// due index, scans no table and reads at most 5,000 pages.
func checkClaimPlans(t *testing.T, n, hot int, cases []claimCase) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, inboxtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	const seed = `
INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
    event_type, schema_version, fingerprint, payload, created_at)
SELECT gen_random_uuid(), 'tenant', CASE WHEN g <= $2::int THEN 'hot' ELSE 'cold-' || lpad((g % 100)::text, 3, '0') END,
    'bench', 'orders', 'm-' || g, 'order.created', 1, sha256(g::text::bytea), '{}',
    now() - interval '1 hour' + g * interval '1 millisecond'
FROM generate_series(1, $1::int) g`
	if _, err := conn.Exec(ctx, seed, n, hot); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts, available_at)
SELECT id, scope_kind, scope_id, consumer, max_attempts, created_at FROM pginbox_receipts;
ANALYZE pginbox_receipts, pginbox_work`); err != nil {
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
	// EXPLAIN plans its statement for the values given; the generic plan is
	// seen through a prepared statement, with plan_cache_mode forcing it.
	if _, err := conn.Exec(ctx, "PREPARE claim_generic AS "+strings.TrimSpace(stripComments(claim.sql))); err != nil {
		t.Fatal(err)
	}
	literals := func(afterID string, maxScopes int) string {
		byName := map[string]string{
			"consumers": "ARRAY['orders']", "after_scope_kind": "'tenant'", "after_scope_id": "'" + afterID + "'",
			"max_walk": "1000", "max_scopes": strconv.Itoa(maxScopes), "max_count": "64",
			"claim_token": "'" + inboxtype.New().UUIDString() + "'", "lease_ms": "30000",
		}
		out := make([]string, len(claim.params))
		for i, p := range claim.params {
			out[i] = byName[p]
		}
		return strings.Join(out, ", ")
	}
	hit := regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?`)
	// A case with 200 scopes goes round all 101: the walk after the cursor,
	// then from the first scope up to it.
	for _, c := range cases {
		after := c.after + " (" + c.mode + ")"
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SELECT set_config('plan_cache_mode', $1, true)", c.mode); err != nil {
			t.Fatal(err)
		}
		var rows pgx.Rows
		if c.mode == "force_generic_plan" {
			rows, err = tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) EXECUTE claim_generic("+literals(c.after, c.maxScopes)+")")
		} else {
			rows, err = tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) "+strings.TrimSpace(stripComments(claim.sql)), args(c.after, c.maxScopes)...)
		}
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		tx.Rollback(ctx)
		plan := strings.Join(lines, "\n")
		if strings.Contains(plan, "Seq Scan on pginbox_") || !strings.Contains(plan, "pginbox_work_due") {
			t.Fatalf("after %q: the claim scans a table or does not walk the due index:\n%s", after, plan)
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
		t.Logf("after %q: %d pages for the claim of 64 (up to %d scopes) from %d due %s", after, pages, c.maxScopes, n, strings.TrimSpace(claimed))
		if pages > 5000 {
			t.Fatalf("after %q: the claim read %d pages with %d due: want a walk of the index, not of the backlog:\n%s", after, pages, n, plan)
		}
	}
}
