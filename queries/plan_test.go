// Package queries_test checks the plan Citus chooses for every named query
// in this directory: pginbox's hot path must run on one node per scope.
package queries_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
)

func TestMain(m *testing.M) { inboxtest.Main(m) }

// query is one named query of queries/*.sql with its sqlc parameters
// numbered ($1, $2, ... in order of first use) and their names.
type query struct {
	name, file, sql string
	params          []string
}

var (
	nameLine = regexp.MustCompile(`(?m)^-- name: (\w+) :\w+\s*$`)
	param    = regexp.MustCompile(`sqlc\.n?arg\((\w+)\)|@(\w+)`)
)

// loadQueries parses every named query in this directory.
func loadQueries(t *testing.T) []query {
	t.Helper()
	files, err := filepath.Glob("*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries: %v", err)
	}
	var out []query
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		idx := nameLine.FindAllStringSubmatchIndex(text, -1)
		for i, m := range idx {
			end := len(text)
			if i+1 < len(idx) {
				end = idx[i+1][0]
			}
			q := query{name: text[m[2]:m[3]], file: f}
			body := stripComments(text[m[1]:end]) // comments name parameters too
			num := map[string]int{}
			q.sql = param.ReplaceAllStringFunc(body, func(s string) string {
				sm := param.FindStringSubmatch(s)
				name := sm[1] + sm[2]
				if _, ok := num[name]; !ok {
					q.params = append(q.params, name)
					num[name] = len(q.params)
				}
				return fmt.Sprintf("$%d", num[name])
			})
			out = append(out, q)
		}
	}
	return out
}

// The representative scope of the plan test.
const (
	testTenant   = "tenant-a"
	testConsumer = "orders"
)

// value is a representative argument for parameter name of type oid.
func value(name string, oid uint32, allScopes bool) any {
	id := inboxtype.New().UUIDString()
	switch name {
	case "all_scopes":
		return allScopes
	case "scope_kind":
		return "tenant"
	case "scope_id", "tenant", "apply_tenant", "receipt_tenant":
		return testTenant
	case "scope_kinds":
		return []string{"tenant"}
	case "scope_ids":
		return []string{testTenant}
	case "consumer":
		return testConsumer
	case "consumers":
		return []string{testConsumer}
	case "statuses":
		return []string{}
	case "payload", "metadata":
		return "{}"
	case "after", "created_after", "created_before":
		return nil // optional filters
	}
	switch oid {
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.UnknownOID:
		return "x"
	case pgtype.UUIDOID:
		return id
	case pgtype.BoolOID:
		return false
	case pgtype.Int4OID, pgtype.Int8OID, pgtype.Int2OID:
		return 10
	case pgtype.TimestamptzOID:
		return time.Now()
	case pgtype.ByteaOID:
		return make([]byte, 32)
	case pgtype.JSONOID, pgtype.JSONBOID:
		return "{}"
	case pgtype.TextArrayOID:
		if strings.HasSuffix(name, "ids") || strings.HasSuffix(name, "tokens") {
			return []string{id}
		}
		return []string{"x"}
	case pgtype.Int4ArrayOID:
		return []int32{1}
	case pgtype.Int8ArrayOID:
		return []int64{0}
	case pgtype.TimestamptzArrayOID:
		return []time.Time{time.Now()}
	case pgtype.BoolArrayOID:
		return []bool{false}
	case pgtype.ByteaArrayOID:
		return [][]byte{make([]byte, 32)}
	case pgtype.UUIDArrayOID:
		return []string{id}
	}
	return "x"
}

// plan kinds.
const (
	router      = "router"      // one task: one shard, one node
	delegated   = "delegated"   // a call of a function distributed by its scope argument: Citus runs it on the scope's node
	multi       = "multi-shard" // fans out (or pulls rows to the coordinator)
	coordinator = "coordinator" // touches no distributed table
	notPlanned  = "not a query" // LISTEN, SET: no plan
	refused     = "refused"     // Citus cannot run it (the error is the plan)
)

var (
	taskCount    = regexp.MustCompile(`Task Count: (\d+)`)
	functionCall = regexp.MustCompile(`(?i)\bFROM\s+(pginbox_\w+)\s*\(`)
)

// functionKind classifies a call of pginbox's function fn, which EXPLAIN
// cannot: Citus hands a call outside a transaction to one node when the
// function is distributed by its scope argument and colocated with
// pginbox_receipts (a run-time check is in inbox's Citus tests, which count
// the commands sent to the worker nodes).
func functionKind(t *testing.T, conn *pgx.Conn, fn string) (kind, plan string) {
	t.Helper()
	var arg *string
	var colocated bool
	err := conn.QueryRow(context.Background(), `
		SELECT p.proargnames[d.distribution_argument_index + 1],
			coalesce(d.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'pginbox_receipts'::regclass), false)
		FROM pg_proc p
		LEFT JOIN pg_dist_object d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
		WHERE p.proname = $1`, fn).Scan(&arg, &colocated)
	if err != nil {
		return refused, err.Error()
	}
	plan = fmt.Sprintf("function %s: distribution argument %v, colocated with pginbox_receipts: %v", fn, deref(arg), colocated)
	if arg != nil && *arg == "p_scope_id" && colocated {
		return delegated, plan
	}
	return coordinator, plan
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

// classify runs EXPLAIN for q with representative arguments on conn.
func classify(t *testing.T, conn *pgx.Conn, q query, allScopes bool) (kind, plan string) {
	t.Helper()
	ctx := context.Background()
	trimmed := strings.TrimSpace(stripComments(q.sql))
	if upper := strings.ToUpper(trimmed); strings.HasPrefix(upper, "LISTEN") || strings.HasPrefix(upper, "SET ") {
		return notPlanned, ""
	}
	if m := functionCall.FindStringSubmatch(trimmed); m != nil {
		return functionKind(t, conn, m[1])
	}
	sd, err := conn.Prepare(ctx, "", trimmed)
	if err != nil {
		t.Fatalf("%s (%s): preparing: %v", q.name, q.file, err)
	}
	args := make([]any, len(q.params))
	for i, p := range q.params {
		args[i] = value(p, sd.ParamOIDs[i], allScopes)
	}
	rows, err := conn.Query(ctx, "EXPLAIN (COSTS OFF) "+trimmed, args...)
	if err != nil {
		return refused, err.Error()
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return refused, err.Error()
	}
	plan = strings.Join(lines, "\n")
	counts := taskCount.FindAllStringSubmatch(plan, -1)
	switch {
	case !strings.Contains(plan, "Custom Scan (Citus"):
		return coordinator, plan
	case len(counts) == 0:
		return multi, plan
	}
	for _, c := range counts {
		if c[1] != "1" {
			return multi, plan
		}
	}
	if strings.Contains(plan, "Distributed Subplan") || strings.Contains(plan, "pull to coordinator") ||
		strings.Contains(plan, "repartition") {
		return multi, plan
	}
	return router, plan
}

func stripComments(sql string) string {
	var b strings.Builder
	for _, l := range strings.Split(sql, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "--") {
			continue
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// expectation is what a query's plan must be on Citus: its kind, and for a
// query with @all_scopes, its kind for the operator's all-scopes view. why
// documents every entry that is not a router plan.
type expectation struct {
	kind, allScopes string
	why             string
}

// TestCitusPlans runs EXPLAIN on a Citus cluster for every named query in
// queries/*.sql, with representative arguments for one tenant, and checks
// the plan against plans below: a router plan (one task, one shard, one
// node), or an entry of the fan-out allow-list with its reason. A query
// without an entry fails, so a new query cannot silently fan out.
func TestCitusPlans(t *testing.T) {
	conn, err := pgx.Connect(context.Background(), inboxtest.CitusDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	seen := map[string]bool{}
	for _, q := range loadQueries(t) {
		seen[q.name] = true
		t.Run(q.name, func(t *testing.T) {
			want, ok := plans[q.name]
			if !ok {
				kind, plan := classify(t, conn, q, false)
				t.Fatalf("%s (%s) has no entry in plans (queries/plan_test.go); on Citus its plan is %s:\n%s\n"+
					"Make it route to one shard (scope_id equality on every distributed table), or add it with the reason it fans out",
					q.name, q.file, kind, plan)
			}
			if kind, plan := classify(t, conn, q, false); kind != want.kind {
				t.Errorf("%s (%s): want a %s plan on Citus, got %s (%s):\n%s", q.name, q.file, want.kind, kind, want.why, plan)
			}
			if slices.Contains(q.params, "all_scopes") {
				if want.allScopes == "" {
					t.Fatalf("%s has @all_scopes: its entry must say the all-scopes plan", q.name)
				}
				if kind, plan := classify(t, conn, q, true); kind != want.allScopes {
					t.Errorf("%s (%s) with all_scopes: want %s, got %s:\n%s", q.name, q.file, want.allScopes, kind, plan)
				}
			}
		})
	}
	var stale []string
	for name := range plans {
		if !seen[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("plans lists queries that no longer exist: %v", stale)
	}
}
