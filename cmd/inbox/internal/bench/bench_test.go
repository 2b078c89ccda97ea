package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/cmd/inbox/internal/bench"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestMain(m *testing.M) {
	inboxtest.Main(m)
}

// tinyArgs runs every scenario at toy sizes: correctness, not speed.
func tinyArgs(dsn string) []string {
	return []string{
		"--database-url", dsn, "--quiet",
		"--rounds", "2", "--calls", "50", "--retained", "100",
		"--group-callers", "16", "--group-calls", "80",
		"--batch-size", "10", "--batches", "4",
		"--drain-messages", "40", "--drain-concurrency", "2,5", "--drain-batched-concurrency", "4",
		"--retained-rows", "1000",
		"--hold", "2s", "--hold-around", "1s", "--hold-rate", "50",
	}
}

func TestBenchRunsEveryScenarioAndChecksCounts(t *testing.T) {
	is := is.New(t)
	dsn := inboxtest.Database(t)
	var stdout, stderr bytes.Buffer
	code := bench.Command(context.Background(), append(tinyArgs(dsn), "--json"), &stdout, &stderr)
	is.Equal(code, 0) // every correctness check passed
	if code != 0 {
		t.Log(stderr.String())
	}

	var got []string
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		is.NoErr(json.Unmarshal(sc.Bytes(), &r))
		name := r["scenario"].(string)
		got = append(got, name)

		for _, k := range []string{"scenario", "description", "concurrency", "rounds", "calls", "seconds",
			"calls_per_sec", "p50_ms", "p95_ms", "p99_ms", "errors", "counts", "raw", "ratio",
			"target", "meets_target", "verified", "ok", "failures", "environment"} {
			if _, ok := r[k]; !ok {
				t.Errorf("%s: no %q in %s", name, k, sc.Text())
			}
		}
		for _, k := range []string{"description", "calls", "seconds", "calls_per_sec", "p50_ms", "p95_ms", "p99_ms", "errors"} {
			if _, ok := r["raw"].(map[string]any)[k]; !ok {
				t.Errorf("%s: no raw.%s", name, k)
			}
		}
		for _, k := range []string{"accepted", "duplicates", "business_rows", "receipts_in_db"} {
			if _, ok := r["counts"].(map[string]any)[k]; !ok {
				t.Errorf("%s: no counts.%s", name, k)
			}
		}
		env := r["environment"].(map[string]any)
		for _, k := range []string{"postgres_version", "fsync", "synchronous_commit", "cores", "go_version", "pginbox_commit"} {
			if v, ok := env[k]; !ok || v == "" {
				t.Errorf("%s: environment.%s missing", name, k)
			}
		}

		is.Equal(r["ok"], true)
		is.Equal(r["errors"], 0.0)
		is.True(r["calls_per_sec"].(float64) > 0)
		if name != bench.ScenarioXminHold { // compares its phases, has no raw side
			is.True(r["raw"].(map[string]any)["calls_per_sec"].(float64) > 0)
		}
		is.True(r["ratio"].(float64) > 0)
		counts := r["counts"].(map[string]any)
		switch {
		case name == bench.ScenarioAcceptDup90:
			// 2 rounds x 50 calls, every 10th new.
			is.Equal(counts["accepted"], 10.0)
			is.Equal(counts["duplicates"], 90.0)
			is.Equal(counts["raw_duplicates"], 90.0)
			is.Equal(counts["receipts_in_db"], 105.0) // 100 retained + 5 new
		case strings.HasPrefix(name, "drain-"):
			is.Equal(counts["business_rows"], 80.0)
			is.Equal(counts["raw_business_rows"], 80.0)
		case name == bench.ScenarioAcceptBatch:
			is.Equal(counts["accepted"], 80.0)
		case name == bench.ScenarioXminHold:
			is.Equal(counts["accepted"], 200.0) // 50/s for 1s + 2s + 1s
			is.Equal(counts["business_rows"], 200.0)
			extra := r["extra"].(map[string]any)
			is.Equal(extra["hold_seconds"], 2.0)
			for _, k := range []string{"completed_per_sec_hold", "claim_p50_ms_hold", "dead_tuples_max_hold"} {
				is.True(extra[k].(float64) > 0)
			}
		case name == bench.ScenarioRetained1M:
			extra := r["extra"].(map[string]any)
			is.Equal(extra["retained_rows"], 1000.0)
			for _, k := range []string{"empty_p95_ms", "retained_p95_ms", "accept_p95_ratio", "claim_p50_empty_ms", "claim_p50_retained_ms", "claim_ratio"} {
				is.True(extra[k].(float64) > 0)
			}
		}
	}
	is.Equal(got, []string{"accept-fresh", "accept-retained", "accept-dup90", "accept-group", "accept-batch", "drain-c2", "drain-c5", "drain-batched-c4", "retained-1m", "xmin-hold", "relay"})
}

func TestBenchTableAndRefusals(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.Database(t)

	var stdout, stderr bytes.Buffer
	args := append(tinyArgs(dsn), "--scenarios", "accept-dup90", "--rounds", "1")
	is.Equal(bench.Command(ctx, args, &stdout, &stderr), 0)
	out := stdout.String()
	is.True(strings.Contains(out, "accept-dup90"))
	is.True(strings.Contains(out, "50 calls: 5 accepted, 45 duplicates, 0 errors"))

	// A database that holds receipts is refused unless --reset says so.
	conn, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
		event_type, schema_version, fingerprint, payload)
		VALUES (gen_random_uuid(), 'global', '', 's', 'c', 'm', 'e', 1, sha256('x'), '{}')`)
	is.NoErr(err)
	stdout.Reset()
	stderr.Reset()
	is.Equal(bench.Command(ctx, args, &stdout, &stderr), 1)
	is.True(strings.Contains(stderr.String(), "--reset"))
	is.Equal(bench.Command(ctx, append(args, "--reset"), &stdout, &stderr), 0)

	// So is one whose outbox holds events.
	_, err = conn.Exec(ctx, `INSERT INTO pginbox_outbox (id, source, destination, event_type, schema_version, payload)
		VALUES (gen_random_uuid(), 's', 'd', 'e', 1, '{}')`)
	is.NoErr(err)
	stderr.Reset()
	is.Equal(bench.Command(ctx, args, &stdout, &stderr), 1)
	is.True(strings.Contains(stderr.String(), "0 receipts and 1 outbox events"))

	is.Equal(bench.Command(ctx, []string{"--scenarios", "nope", "--database-url", dsn, "--quiet"}, &stdout, &stderr), 1)
	is.Equal(bench.Command(ctx, []string{"--drain-concurrency", "x"}, &stdout, &stderr), 2)
}

// A business write that silently goes missing must fail the run.
func TestBenchFailsLoudlyOnAMiscount(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.Database(t)
	conn, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
		CREATE TABLE pginbox_bench_effects (receipt_id uuid PRIMARY KEY, message_id text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
		CREATE FUNCTION lose_some() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF right(NEW.message_id, 1) = '7' THEN RETURN NULL; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER lose_some BEFORE INSERT ON pginbox_bench_effects FOR EACH ROW EXECUTE FUNCTION lose_some();`)
	is.NoErr(err)

	var stdout, stderr bytes.Buffer
	args := append(tinyArgs(dsn), "--scenarios", "drain", "--drain-concurrency", "2", "--json")
	is.Equal(bench.Command(ctx, args, &stdout, &stderr), 1)
	is.True(strings.Contains(stderr.String(), "FAILED"))
	var r struct {
		OK       bool     `json:"ok"`
		Failures []string `json:"failures"`
	}
	is.NoErr(json.Unmarshal(stdout.Bytes(), &r))
	is.True(!r.OK)
	is.True(len(r.Failures) > 0)
	is.True(strings.Contains(r.Failures[0], "business rows"))
}

// The job-queue scenarios count completions over a fixed time and check every
// handled job committed.
func TestBenchJobsScenario(t *testing.T) {
	is := is.New(t)
	dsn := inboxtest.Database(t)
	var stdout, stderr bytes.Buffer
	jsonPath := filepath.Join(t.TempDir(), "jobs.jsonl")
	code := bench.Command(context.Background(), []string{"--database-url", dsn, "--quiet", "--json-file", jsonPath,
		"--scenarios", "jobs,jobs-batched", "--rounds", "1", "--job-workers", "2", "--job-duration", "1s", "--job-warmup", "500ms",
		"--job-backlog", "200"}, &stdout, &stderr)
	if code != 0 {
		t.Log(stderr.String(), stdout.String())
	}
	is.Equal(code, 0)
	// No ratio and no verdict in the table: River is measured outside the run.
	var rows []string
	for _, line := range strings.Split(stdout.String(), "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasPrefix(f[0], "jobs-") && !strings.HasSuffix(f[0], ":") {
			rows = append(rows, f[0])
			is.Equal(f[len(f)-3:], []string{"-", "-", "pass"})
		}
	}
	// Without its rows the loop above checks nothing.
	if len(rows) != 2 {
		t.Fatalf("the table has jobs rows %v, want one per scenario (jobs-c2, jobs-batched-c2); stdout:\n%s", rows, stdout.String())
	}
	jsonLines, err := os.ReadFile(jsonPath)
	is.NoErr(err)
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(jsonLines))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		is.NoErr(json.Unmarshal(sc.Bytes(), &r))
		names = append(names, r["scenario"].(string))
		is.True(r["calls"].(float64) > 0)
		extra := r["extra"].(map[string]any)
		is.True(extra["non_hot_updates_per_msg"] != nil)
		// Every completion claimed its work row and deleted it: two writes at least.
		is.True(extra["work_row_versions_per_msg"].(float64) >= 1.5)
	}
	is.Equal(names, []string{"jobs-c2", "jobs-batched-c2"})
}

// The ingest scenarios accept through the inbox while the worker drains,
// hold the backlog near its target, and check every message in the database;
// --profile writes the phase's CPU profile, wait events and CPU account.
func TestBenchIngestScenarios(t *testing.T) {
	is := is.New(t)
	dsn := inboxtest.Database(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := bench.Command(context.Background(), []string{"--database-url", dsn, "--quiet", "--json",
		"--scenarios", "ingest,ingest-batched,ingest-accept", "--rounds", "1", "--job-workers", "3",
		"--job-duration", "2s", "--job-warmup", "1s", "--job-backlog", "300", "--ingest-batch", "50",
		"--concurrency", "2", "--ingest-tenants", "2", "--profile", dir}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var names []string
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r bench.Result
		is.NoErr(json.Unmarshal(sc.Bytes(), &r))
		names = append(names, r.Scenario)
		is.True(r.OK)
		is.True(r.Calls > 0)        // completions in the measured window
		is.True(r.CallsPerSec > 0)  // their median rate
		is.True(r.P95Ms >= r.P50Ms) // pickup latency
		is.True(r.P50Ms > 0)
		is.True(r.Counts.Accepted >= r.Calls) // everything completed was accepted first
		for _, k := range []string{"backlog_median", "accepted_per_sec", "accept_call_p50_ms", "dead_tuples_end_per_1k", "completions_mean_per_sec", "load_avg_start"} {
			if _, ok := r.Extra[k]; !ok {
				t.Errorf("%s: no extra %s", r.Scenario, k)
			}
		}
		is.True(r.Extra["backlog_median"] <= 300+50)         // the depth target holds, give or take one call
		is.True(r.Extra["work_row_versions_per_msg"] >= 1.5) // claim and completion of each work row
		for _, f := range []string{".cpu.pprof", ".waits.txt", ".cpu.txt"} {
			st, err := os.Stat(filepath.Join(dir, r.Scenario+"-round1"+f))
			is.NoErr(err)
			is.True(st.Size() > 0)
		}
	}
	is.Equal(names, []string{"ingest-c3", "ingest-batched-c3", "ingest-accept-c3"})
	waits, err := os.ReadFile(filepath.Join(dir, "ingest-c3-round1.waits.txt"))
	is.NoErr(err)
	is.True(strings.Contains(string(waits), "pginbox-bench-ingest")) // both sides were sampled
	is.True(strings.Contains(string(waits), "pginbox-bench-drain"))
}

// With hooks, the accept and drain scenarios measure a third side through
// them: every hooked accept and handler call goes through the hooks, and the
// report compares that side with plain pginbox.
func TestBenchHooks(t *testing.T) {
	is := is.New(t)
	dsn := inboxtest.Database(t)
	var accepts, handled, observed, stopped atomic.Int64
	hooks := &bench.Hooks{
		Name: "counting",
		Client: func(c *inbox.Config) {
			c.AcceptMiddleware = append(c.AcceptMiddleware, func(next inbox.AcceptFunc) inbox.AcceptFunc {
				return func(ctx context.Context, m inbox.Message) (inbox.AcceptResult, error) {
					accepts.Add(1)
					return next(ctx, m)
				}
			})
		},
		Worker: func(c *inbox.WorkerConfig) {
			c.HandlerMiddleware = append(c.HandlerMiddleware, func(next handler.Func) handler.Func {
				return func(ctx context.Context, m *handler.Msg) error {
					handled.Add(1)
					return next(ctx, m)
				}
			})
		},
		Observe: func(*inbox.Worker) func() {
			observed.Add(1)
			return func() { stopped.Add(1) }
		},
	}
	var stdout, stderr bytes.Buffer
	args := append(tinyArgs(dsn), "--json", "--scenarios", "accept-fresh,drain", "--drain-concurrency", "2")
	code := bench.CommandWithHooks(context.Background(), args, &stdout, &stderr, hooks)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	is.Equal(accepts.Load(), int64(2*50)) // 2 rounds x 50 calls, hooked side only
	is.Equal(handled.Load(), int64(2*40)) // 2 rounds x 40 receipts
	is.Equal(observed.Load(), int64(2))
	is.Equal(stopped.Load(), int64(2))
	sc := bufio.NewScanner(&stdout)
	n := 0
	rep := &bench.Report{}
	for sc.Scan() {
		var r bench.Result
		is.NoErr(json.Unmarshal(sc.Bytes(), &r))
		rep.Results = append(rep.Results, &r)
		is.True(r.OK)
		is.True(r.Hooked != nil)
		is.Equal(r.Hooked.Calls, r.Calls)
		is.True(r.HookedRatio > 0)
		is.Equal(r.HookedTarget, ">= 0.95 x pginbox without hooks")
		n++
	}
	is.Equal(n, 2)
	var table bytes.Buffer
	is.NoErr(bench.WriteTable(&table, rep))
	is.True(strings.Contains(table.String(), "pginbox with the counting hooks installed, same callers: ")) // the hooked side is in the human report
	is.True(strings.Contains(table.String(), "(goal >= 0.95 x pginbox without hooks: "))
}

// --rls adds a side with row-level security enabled to accept and drain,
// under the application and system roles, and reports it against RLS off.
func TestBenchRLS(t *testing.T) {
	is := is.New(t)
	dsn := inboxtest.Database(t)
	var stdout, stderr bytes.Buffer
	args := append(tinyArgs(dsn), "--json", "--scenarios", "accept-fresh,accept-batch,drain,drain-batched", "--drain-concurrency", "2", "--rls")
	code := bench.Command(context.Background(), args, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	rep := &bench.Report{}
	withRLS := map[string]bool{}
	for sc.Scan() {
		var r bench.Result
		is.NoErr(json.Unmarshal(sc.Bytes(), &r))
		rep.Results = append(rep.Results, &r)
		is.True(r.OK)
		withRLS[r.Scenario] = r.RLS != nil
		if r.RLS != nil {
			is.Equal(r.RLS.Calls, r.Calls) // every RLS phase handled all its messages
			is.True(r.RLSRatio > 0)
			is.Equal(r.RLSTarget, ">= 0.90 x pginbox with row-level security off")
		}
	}
	is.Equal(withRLS, map[string]bool{"accept-fresh": true, "accept-batch": false, "drain-c2": true, "drain-batched-c4": true})
	var table bytes.Buffer
	is.NoErr(bench.WriteTable(&table, rep))
	is.True(strings.Contains(table.String(), "pginbox with row-level security enabled (pginbox_bench_app for accepts and handlers")) // in the human report

	// The run left no role and no tenancy behind.
	conn, err := pgx.Connect(context.Background(), dsn)
	is.NoErr(err)
	defer conn.Close(context.Background())
	var roles int
	is.NoErr(conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'pginbox_bench_%'").Scan(&roles))
	is.Equal(roles, 0)
	var rls bool
	is.NoErr(conn.QueryRow(context.Background(), "SELECT relrowsecurity FROM pg_class WHERE oid = 'pginbox_receipts'::regclass").Scan(&rls))
	is.True(!rls)
}

// The citus scenario runs accept, accept-batch, batched drain and no-op
// drain on a single node, on a Citus cluster through its coordinator and on
// the same cluster with the sessions on its worker nodes (inbox.Nodes),
// checks the counts on every side, reports per side and node the cost per
// message (CPU, statements, plans, round trips), and adds up the cost per
// accepted and completed message.
func TestBenchCitus(t *testing.T) {
	is := is.New(t)
	// No wait for pg_stat_database: the checks below read statement counts,
	// which pg_stat_statements has at once.
	bench.SetCitusStatsSettle(t, 0)
	var stdout, stderr bytes.Buffer
	code := bench.Command(context.Background(), []string{"--quiet", "--json", "--fsync=false", "--scenarios", "citus",
		"--rounds", "2", "--calls", "40", "--batches", "6", "--batch-size", "10",
		"--drain-messages", "100", "--drain-batched-concurrency", "3", "--drain-batch", "5",
		// One tenant: with many, a tenant quiet for 25 ms gets its own
		// wake-up statement after its accept, which this account leaves out.
		"--citus-tenants", "1"}, &stdout, &stderr)
	if code != 0 && strings.Contains(stdout.String(), "Citus is not installed") && os.Getenv("CI") != "true" {
		t.Skipf("bench: skipping: this test needs Citus installed in the PostgreSQL server")
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(stdout.String(), stderr.String())
		}
	})
	is.Equal(code, 0)
	var got []string
	for line := range strings.SplitSeq(strings.TrimSpace(stdout.String()), "\n") {
		var r map[string]any
		is.NoErr(json.Unmarshal([]byte(line), &r))
		scenario := r["scenario"].(string)
		got = append(got, scenario)
		is.Equal(r["ok"], true)
		is.True(strings.Contains(r["description"].(string), "overhead, not its scaling"))
		extra := r["extra"].(map[string]any)
		x := func(k string) float64 {
			t.Helper()
			v, ok := extra[k].(float64)
			if !ok {
				t.Fatalf("%s: no %s in %v", scenario, k, extra)
			}
			return v
		}
		// Every side's cost account, in every result.
		for _, side := range []string{"single", "citus", "nodes"} {
			is.True(x(side+"_round_trips_per_msg") > 0)
			is.True(x(side+"_all_stmts_per_msg") > 0)
			is.True(x(side+"_all_plans_per_msg") > 0)
			x(side + "_all_cpu_us_per_msg")
		}
		for _, node := range []string{"coordinator", "worker1", "worker2"} {
			x("citus_" + node + "_cpu_us_per_msg")
			x("nodes_" + node + "_cpu_us_per_msg")
			x("nodes_" + node + "_plans_per_msg")
		}
		// The raw loops' CPU per row, on every side: the floor beside
		// each figure.
		for _, side := range []string{"single", "citus", "nodes"} {
			x("raw_" + side + "_cpu_us_per_row")
		}
		is.True(strings.Contains(strings.Join(notes(r), "\n"), "raw loop"))
		if scenario == "citus-accepted-completed-c3" {
			// accept-batch + drain-noop: CPU on every side, Citus's over one
			// node's, and with the sessions on the worker nodes the
			// coordinator's share far below its share through it.
			is.True(x("single_all_cpu_us_per_msg") > 0)
			is.True(x("citus_cpu_ratio_to_single") > 0)
			is.True(x("nodes_cpu_ratio_to_single") > 0)
			is.True(x("nodes_coordinator_cpu_share") < x("citus_coordinator_cpu_share"))
			is.True(math.Abs(r["ratio"].(float64)-x("nodes_cpu_ratio_to_single")) < 0.01)
			is.True(strings.Contains(strings.Join(notes(r), "\n"), "coordinator share"))
			continue
		}
		is.True(x("citus_per_sec") > 0)
		is.True(x("single_per_sec") > 0)
		is.True(x("nodes_per_sec") > 0)
		is.True(r["ratio"].(float64) > 0)
		is.True(x("nodes_ratio") > 0)
		// The raw loop beside each phase, on every side.
		is.True(x("raw_single_per_sec") > 0)
		is.True(x("raw_citus_per_sec") > 0)
		is.True(x("raw_nodes_per_sec") > 0)
		is.True(x("ratio_over_raw_ratio") > 0)
		is.True(x("nodes_ratio_over_raw_ratio") > 0)
		// With the sessions on the worker nodes, the coordinator runs none
		// of pginbox's statements but a worker's start (its checks and
		// LISTEN, 4 statements for 100 messages) and Citus's deadlock
		// detector.
		is.True(x("nodes_coordinator_stmts_per_msg") < 0.1)
		verified := r["verified"].(string)
		switch scenario {
		case "citus-accept":
			// 8 accepts to warm up, 2 x 40; the raw loop one row a call.
			for _, side := range []string{"single", "citus", "nodes"} {
				is.True(strings.Contains(verified, side+": 88 receipts, 0 COMPLETED, 0 business rows, 0 no-op COMPLETED, 80 raw rows"))
			}
			// An accept is one call of pginbox_accept on the coordinator
			// (and a wake-up when one is due), which Citus hands whole to
			// the scope's node: one statement there (the function's inserts
			// are not top-level statements); one statement on the single
			// node; on the worker nodes, one statement there.
			coordinator := x("citus_coordinator_stmts_per_msg")
			workers := x("citus_worker1_stmts_per_msg") + x("citus_worker2_stmts_per_msg")
			is.True(coordinator >= 1 && coordinator < 2.5) // 3.1 before the call was delegated
			is.True(workers >= 1 && workers < 2)           // 6 before
			is.True(x("single_node_stmts_per_msg") >= 1)
			is.True(x("single_node_stmts_per_msg") < 2)
			onNodes := x("nodes_worker1_stmts_per_msg") + x("nodes_worker2_stmts_per_msg")
			is.True(onNodes >= 1 && onNodes < 2)
			// A round trip per accept, and the wake-ups.
			for _, side := range []string{"single", "citus", "nodes"} {
				is.True(x(side+"_round_trips_per_msg") >= 1 && x(side+"_round_trips_per_msg") < 2)
			}
		case "citus-accept-batch":
			// + 2 x 6 batches of 10.
			for _, side := range []string{"single", "citus", "nodes"} {
				is.True(strings.Contains(verified, side+": 208 receipts, 0 COMPLETED, 0 business rows, 0 no-op COMPLETED, 200 raw rows"))
				// A call per batch of 10, and the wake-ups.
				is.True(x(side+"_round_trips_per_msg") >= 0.1 && x(side+"_round_trips_per_msg") < 0.3)
			}
		case "citus-drain-batched-c3":
			// + 2 x (30 to warm up + 100) drained, a business row each; the
			// raw loops 2 x 100.
			for _, side := range []string{"single", "citus", "nodes"} {
				is.True(strings.Contains(verified, side+": 468 receipts, 260 COMPLETED, 260 business rows, 0 no-op COMPLETED, 400 raw rows"))
			}
			is.True(x("citus_coordinator_stmts_per_msg") >= 1) // at least the business insert
		case "citus-drain-noop-c3":
			for _, side := range []string{"single", "citus", "nodes"} {
				is.True(strings.Contains(verified, side+": 728 receipts, 260 COMPLETED, 260 business rows, 260 no-op COMPLETED, 600 raw rows"))
			}
		}
	}
	is.Equal(got, []string{"citus-accept", "citus-accept-batch", "citus-drain-batched-c3", "citus-drain-noop-c3", "citus-accepted-completed-c3"})
}

// notes are a result's notes lines.
func notes(r map[string]any) []string {
	var out []string
	lines, _ := r["notes"].([]any)
	for _, l := range lines {
		out = append(out, l.(string))
	}
	return out
}

// The fairness scenario handles every cold message exactly once in every
// phase, reports each phase's latencies (the paced hot tenant's messages
// handled too; the wait for the claim and after it apart), keeps the flood
// going through its phase, and drains the hot backlog once more without
// the cold tenants for the throughput baseline.
func TestBenchFairnessScenario(t *testing.T) {
	is := is.New(t)
	dsn := inboxtest.Database(t)
	var stdout, stderr bytes.Buffer
	jsonPath := filepath.Join(t.TempDir(), "fairness.jsonl")
	code := bench.Command(context.Background(), []string{"--database-url", dsn, "--quiet", "--json-file", jsonPath,
		"--scenarios", "fairness", "--job-duration", "2s"}, &stdout, &stderr)
	if code != 0 {
		t.Log(stderr.String(), stdout.String())
	}
	is.Equal(code, 0)
	jsonLines, err := os.ReadFile(jsonPath)
	is.NoErr(err)
	var r map[string]any
	is.NoErr(json.Unmarshal(bytes.TrimSpace(jsonLines), &r))
	is.Equal(r["scenario"], "fairness")
	is.Equal(r["ok"], true)
	is.True(r["calls"].(float64) >= 5) // cold messages during the flood, one per 200ms
	extra := r["extra"].(map[string]any)
	is.True(extra["cold_idle_p95_ms"].(float64) > 0)
	is.True(extra["hot_completed_per_sec"].(float64) > 0)
	is.True(extra["hot_alone_per_sec"].(float64) > 0)
	is.True(extra["cold_flood_accept_p95_ms"].(float64) > 0)
	is.True(extra["cold_paced_accept_p95_ms"].(float64) > 0)
	is.True(extra["cold_paced_after_accept_p95_ms"].(float64) > 0)
	for _, phase := range []string{"idle", "paced", "flood"} {
		is.True(extra["cold_"+phase+"_accept_to_claim_p95_ms"].(float64) > 0)
		is.True(extra["cold_"+phase+"_claim_to_start_p95_ms"].(float64) > 0)
		is.True(extra["raw_"+phase+"_p95_ms"].(float64) > 0) // the raw pickups beside the phase
	}
	is.True(extra["raw_flood_p95_vs_idle"].(float64) > 0)
	is.True(extra["ratio_over_raw_ratio"].(float64) > 0)
	raw := r["raw"].(map[string]any)
	is.True(raw["calls"].(float64) >= 5)
	is.True(raw["p95_ms"].(float64) > 0)
	is.True(strings.Contains(r["verified"].(string), "raw pickups, each row claimed once"))
	// The table's row: the raw side has latencies, no rate.
	var row []string
	for line := range strings.Lines(stdout.String()) {
		if f := strings.Fields(line); len(f) == 12 && f[0] == "fairness" {
			row = f
		}
	}
	is.True(row != nil)
	is.Equal(row[7], "-")     // raw/s
	is.True(row[8] != "-")    // raw p95 ms
	is.Equal(row[11], "pass") // checks
	// Only cold messages accepted while the hot backlog lasted count.
	is.True(extra["cold_flood_sent"].(float64) >= r["calls"].(float64))
	is.True(extra["hot_throughput_vs_alone"].(float64) > 0)
	is.True(extra["cold_paced_p95_ms"].(float64) > 0)
	is.True(extra["cold_paced_p95_vs_idle"].(float64) > 0)
	is.True(extra["hot_paced_per_sec"].(float64) > 100) // 500 a second are sent
	is.True(strings.Contains(r["verified"].(string), "beside the paced hot tenant"))
	is.True(strings.Contains(r["verified"].(string), "without them"))
}

// The ordered scenario drains the backlog with and without keys, each
// receipt once, in its key's order.
func TestBenchOrderedScenario(t *testing.T) {
	is := is.New(t)
	dsn := inboxtest.Database(t)
	var stdout, stderr bytes.Buffer
	jsonPath := filepath.Join(t.TempDir(), "ordered.jsonl")
	code := bench.Command(context.Background(), []string{"--database-url", dsn, "--quiet", "--json-file", jsonPath,
		"--scenarios", "ordered", "--ordered-messages", "400", "--rounds", "1", "--drain-concurrency", "4"}, &stdout, &stderr)
	if code != 0 {
		t.Log(stderr.String(), stdout.String())
	}
	is.Equal(code, 0)
	jsonLines, err := os.ReadFile(jsonPath)
	is.NoErr(err)
	var r map[string]any
	is.NoErr(json.Unmarshal(bytes.TrimSpace(jsonLines), &r))
	is.Equal(r["scenario"], "ordered")
	is.Equal(r["ok"], true)
	is.True(r["calls"].(float64) == 400)
	is.True(r["ratio"].(float64) > 0)
	extra := r["extra"].(map[string]any)
	is.Equal(extra["hot_keys"].(float64), float64(10))
	is.True(extra["hot_keys_per_sec"].(float64) > 0)
}

// --profile covers both sides of drain, and the CPU account counts the drain
// backends' time before the phase's pool closes (once it had closed, the
// backends were gone and counted nothing).
func TestBenchDrainProfilesBothSides(t *testing.T) {
	is := is.New(t)
	dsn := inboxtest.Database(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := append(tinyArgs(dsn), "--scenarios", "drain", "--drain-concurrency", "2", "--drain-messages", "400", "--json", "--profile", dir)
	if code := bench.Command(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, phase := range []string{"drain-c2-round1", "drain-c2-raw-round1"} {
		account, err := os.ReadFile(filepath.Join(dir, phase+".cpu.txt"))
		is.NoErr(err)
		var line string
		for l := range strings.Lines(string(account)) {
			if strings.Contains(l, "backends "+"pginbox-bench-drain") {
				line = l
			}
		}
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "backends pginbox-bench-drain"))
		if len(f) < 1 {
			t.Fatalf("%s: no drain backends line in\n%s", phase, account)
		}
		cpu, err := strconv.ParseFloat(f[0], 64)
		is.NoErr(err)
		if cpu <= 0 {
			t.Errorf("%s: the drain backends used %v CPU seconds, want > 0:\n%s", phase, cpu, account)
		}
		_, err = os.Stat(filepath.Join(dir, phase+".waits.txt"))
		is.NoErr(err)
	}
}
