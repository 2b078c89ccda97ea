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

// The keyed accept, the promotion and the count behind a key's head stay
// index-driven with a million keyed receipts queued (10,000 keys of 100, each
// key's head PENDING and the rest BLOCKED): each reads the ordering indexes
// of its key, a few pages, not the backlog. EXPLAIN ANALYZE runs them in a
// transaction that is rolled back.
func TestOrderingPlansWithAMillionQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, inboxtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const seed = `
INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
    event_type, schema_version, fingerprint, payload, ordering_key, ordering_seq)
SELECT gen_random_uuid(), 'tenant', 't-' || (g % 10), 'bench', 'orders', 'm-' || g, 'order.created', 1,
    sha256(g::text::bytea), '{}', 'k-' || (g % 10000), g / 10000 + 1
FROM generate_series(0, 999999) g;
INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts, ordering_key, ordering_seq, status)
SELECT id, scope_kind, scope_id, consumer, max_attempts, ordering_key, ordering_seq,
    CASE WHEN ordering_seq = 1 THEN 'PENDING' ELSE 'BLOCKED' END
FROM pginbox_receipts;
ANALYZE pginbox_receipts, pginbox_work`
	if _, err := conn.Exec(ctx, seed); err != nil {
		t.Fatal(err)
	}
	named := map[string]query{}
	for _, q := range loadQueries(t) {
		named[q.name] = q
	}
	newID := inboxtype.New().UUIDString()
	byName := map[string]any{
		"id": newID, "scope_kind": "tenant", "scope_id": "t-7", "source": "bench", "consumer": "orders",
		"message_id": "new-1", "event_type": "order.created", "schema_version": 1, "fingerprint": make([]byte, 32),
		"payload": "{}", "metadata": "{}", "max_attempts": 10, "ordering_key": "k-4567",
		"consumers": []string{"orders"}, "keys": []string{"k-4567"}, "ordering_seq": 1,
	}
	hit := regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?`)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// checkPlan runs an EXPLAIN and checks that the statement read a few
	// index pages of its key.
	checkPlan := func(name, index, explain string, args ...any) {
		t.Helper()
		rows, err := tx.Query(ctx, explain, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		plan := strings.Join(lines, "\n")
		if strings.Contains(plan, "Seq Scan on pginbox_") || !strings.Contains(plan, index) {
			t.Fatalf("%s does not use %s:\n%s", name, index, plan)
		}
		m := hit.FindStringSubmatch(plan)
		if m == nil {
			t.Fatalf("%s: no buffer counts in the plan:\n%s", name, plan)
		}
		pages, _ := strconv.Atoi(m[1])
		if m[2] != "" {
			read, _ := strconv.Atoi(m[2])
			pages += read
		}
		t.Logf("%s: %d pages with 1,000,000 keyed receipts queued", name, pages)
		if pages > 200 {
			t.Fatalf("%s read %d pages: want a few index pages of its key:\n%s", name, pages, plan)
		}
	}
	for _, c := range []struct{ name, index string }{
		{"ReceiptInsertKeyed", "pginbox_receipts_ordering"},
		{"ReceiptQueueKeyed", "pginbox_work_ordering"},
		{"ReceiptPromote", "pginbox_work_ordering"},
		{"ReceiptKeyBlockedBehind", "pginbox_work_ordering"},
	} {
		q, ok := named[c.name]
		if !ok {
			t.Fatalf("%s not found in queries/", c.name)
		}
		args := make([]any, len(q.params))
		for i, p := range q.params {
			v, ok := byName[p]
			if !ok {
				t.Fatalf("%s has a parameter %q this test does not set", c.name, p)
			}
			args[i] = v
		}
		checkPlan(c.name, c.index, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) "+strings.TrimSpace(stripComments(q.sql)), args...)
	}
	// The worker runs ReceiptPromote on a generic plan (promotion): seen
	// through a prepared statement with plan_cache_mode forcing it.
	promote := named["ReceiptPromote"]
	if _, err := tx.Exec(ctx, "PREPARE promote_generic AS "+strings.TrimSpace(stripComments(promote.sql))); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	literal := map[string]string{"scope_id": "'t-7'", "scope_kind": "'tenant'", "consumers": "ARRAY['orders']", "keys": "ARRAY['k-4568']"}
	var lits []string
	for _, p := range promote.params {
		lits = append(lits, literal[p])
	}
	checkPlan("ReceiptPromote (generic plan)", "pginbox_work_ordering", "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) EXECUTE promote_generic("+strings.Join(lits, ", ")+")")
}
