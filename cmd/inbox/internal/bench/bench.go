// Package bench is the engine behind `inbox bench`. It measures pginbox against
// the raw SQL ceiling: the same SQL statements issued by a plain pgx loop at the
// same concurrency, with no pginbox code, in the same run and on the same
// database. After every scenario it checks the counts in the database and fails
// loudly on any miscount.
//
// Every measured phase starts from the same state (receipts truncated, fixtures
// reseeded, a CHECKPOINT), and pginbox and raw phases alternate over several
// rounds so drift in the machine (disk flush latency varies a lot on cloud
// disks) hits both sides alike.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/schema"
)

// Scenario names, in run order.
const (
	ScenarioAcceptFresh    = "accept-fresh"
	ScenarioAcceptRetained = "accept-retained"
	ScenarioAcceptDup90    = "accept-dup90"
	ScenarioAcceptGroup    = "accept-group"
	ScenarioAcceptBatch    = "accept-batch"
	ScenarioDrain          = "drain" // one result per DrainConcurrency, named drain-c<N>
	ScenarioDrainBatched   = "drain-batched"
	ScenarioRetained1M     = "retained-1m"
	ScenarioJobs           = "jobs"         // one result per JobWorkers, named jobs-c<N>
	ScenarioJobsBatched    = "jobs-batched" // the same with MessagesPerTx = DrainBatch
	// Ingest while draining, one result per JobWorkers: ingest-c<N> feeds
	// through AcceptBatch, ingest-accept-c<N> through Accept; -batched runs
	// the worker with MessagesPerTx = DrainBatch.
	ScenarioIngest              = "ingest"
	ScenarioIngestBatched       = "ingest-batched"
	ScenarioIngestAccept        = "ingest-accept"
	ScenarioIngestAcceptBatched = "ingest-accept-batched"
	ScenarioXminHold            = "xmin-hold"
	// Fairness: cold tenants' pickup latency alone and under a hot tenant's
	// flood.
	ScenarioFairness = "fairness"
	// Ordered: a drain with ordering keys against the same drain without.
	ScenarioOrdered = "ordered"
	ScenarioRelay   = "relay"
)

// Scenarios lists every scenario name Options.Scenarios accepts.
var Scenarios = []string{
	ScenarioAcceptFresh, ScenarioAcceptRetained, ScenarioAcceptDup90,
	ScenarioAcceptGroup, ScenarioAcceptBatch, ScenarioDrain, ScenarioDrainBatched, ScenarioRetained1M,
	ScenarioXminHold, ScenarioRelay,
	ScenarioCitus,
	ScenarioJobs, ScenarioJobsBatched,
	ScenarioIngest, ScenarioIngestBatched, ScenarioIngestAccept, ScenarioIngestAcceptBatched,
	ScenarioFairness, ScenarioOrdered,
}

// DefaultScenarios are what a plain `inbox bench` runs: every scenario but
// citus (which needs Citus installed), the job-queue, ingest and fairness
// ones, which take a fixed wall time each, and ordered.
var DefaultScenarios = Scenarios[:len(Scenarios)-9]

// Options configures a run. Zero fields take the defaults noted.
type Options struct {
	// DatabaseURL is a disposable database to run against. Empty starts an
	// ephemeral cluster instead.
	DatabaseURL string
	// NoFsync runs the ephemeral cluster with fsync, synchronous_commit and
	// full_page_writes off. The default keeps them on: numbers must be honest
	// about durability.
	NoFsync bool
	// Reset allows a run against a database that already holds receipts; the
	// bench deletes them.
	Reset bool

	Scenarios []string // default: all

	Rounds       int // alternating pginbox/raw rounds per scenario; default 3
	Calls        int // accept calls per phase; default 2,000
	Concurrency  int // accept callers (the reference's 8); default 8
	Retained     int // receipts retained before accept-retained and accept-dup90; default 10,000
	GroupCallers int // accept-group callers; default 64
	GroupCalls   int // accept-group calls per phase; default 5 x Calls
	// GroupFlushers is accept-group's Config.GroupCommitFlushers; 0 leaves
	// the client's default.
	GroupFlushers int
	BatchSize     int // messages per accept-batch call; default 100
	Batches       int // accept-batch calls per phase; default 200

	DrainMessages           int   // receipts per drain phase; default Calls
	OrderedMessages         int   // receipts per ordered phase; default 10,000
	DrainConcurrency        []int // worker concurrencies; default 4 and 16
	DrainBatch              int   // messages per handler transaction in drain-batched; default 10
	DrainBatchedConcurrency []int // worker concurrencies of drain-batched; default 4 and 16

	JobWorkers  []int         // worker concurrencies of jobs and ingest scenarios; default 4, 16, 64
	JobBacklog  int           // receipts kept due; default 4,000
	JobSleep    time.Duration // what a no-op handler waits; default 1ms
	JobDuration time.Duration // measured time per phase; default 20s
	JobWarmup   time.Duration // unmeasured time before it; default 10s

	IngestBatch   int // messages per AcceptBatch call in ingest scenarios; default 128
	IngestCallers int // producers calling AcceptBatch; default 1 (Accept uses Concurrency callers)
	IngestTenants int // tenant scopes the ingested messages spread over; default 1
	CitusTenants  int // tenant scopes the citus scenario's messages spread over; default 16
	// ClaimBatch, when above 0, is the ingest and fairness workers' WorkerConfig.ClaimBatch;
	// 0 leaves the worker's default.
	ClaimBatch int
	// ClaimScopes, when above 0, is the fairness worker's
	// WorkerConfig.ClaimScopes; 0 leaves the worker's default.
	ClaimScopes int

	RetainedRows int // COMPLETED receipts in retained-1m; default 1,000,000

	// ProfileDir, when set, receives a CPU profile and a pg_stat_statements
	// report of every pginbox drain phase (the ephemeral cluster then loads
	// pg_stat_statements).
	ProfileDir string

	Hold       time.Duration // xmin-hold: how long the transaction holds the horizon; default 30s
	HoldAround time.Duration // xmin-hold: load before and after the hold; default 10s
	HoldRate   int           // xmin-hold: accepts per second; default 200

	// Hooks, when set, adds a hooked side to the accept and drain scenarios
	// (see Hooks). Nil: none.
	Hooks *Hooks

	// RLS adds a side to the accept and drain scenarios that runs with
	// row-level security enabled (schema.EnableTenancy): accepts and handlers
	// on an application role, the worker's SystemPool on a BYPASSRLS role.
	// Result.RLS reports it against plain pginbox. The roles are created
	// without a password: it needs a superuser and a server that lets them
	// connect (the ephemeral cluster does).
	RLS bool

	RelayEvents int // outbox events per relay phase; default Calls
	Relays      int // relays publishing at once; default 2

	// Progress receives a progress indicator while the run goes on. TTY
	// rewrites one line in place; otherwise one line per phase. Nil: none.
	Progress io.Writer
	TTY      bool // Progress is a terminal: redraw one line
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Rounds, 3)
	def(&o.Calls, 2000)
	def(&o.Concurrency, 8)
	def(&o.Retained, 10_000)
	def(&o.GroupCallers, 64)
	def(&o.GroupCalls, 5*o.Calls)
	def(&o.BatchSize, 100)
	def(&o.Batches, 200)
	def(&o.DrainMessages, o.Calls)
	def(&o.OrderedMessages, 10_000)
	def(&o.RetainedRows, 1_000_000)
	def(&o.HoldRate, 200)
	if o.Hold <= 0 {
		o.Hold = 30 * time.Second
	}
	if o.HoldAround <= 0 {
		o.HoldAround = 10 * time.Second
	}
	def(&o.RelayEvents, o.Calls)
	def(&o.Relays, 2)
	if o.DrainBatch <= 0 {
		o.DrainBatch = 10
	}
	if len(o.DrainConcurrency) == 0 {
		o.DrainConcurrency = []int{4, 16}
	}
	if len(o.DrainBatchedConcurrency) == 0 {
		o.DrainBatchedConcurrency = []int{4, 16}
	}
	if len(o.JobWorkers) == 0 {
		o.JobWorkers = []int{4, 16, 64}
	}
	def(&o.JobBacklog, 4000)
	if o.JobSleep <= 0 {
		o.JobSleep = time.Millisecond
	}
	if o.JobDuration <= 0 {
		o.JobDuration = 20 * time.Second
	}
	if o.JobWarmup <= 0 {
		o.JobWarmup = 10 * time.Second
	}
	def(&o.IngestBatch, 128)
	def(&o.IngestCallers, 1)
	def(&o.IngestTenants, 1)
	def(&o.CitusTenants, 16)
	if len(o.Scenarios) == 0 {
		o.Scenarios = DefaultScenarios
	}
	return o
}

// Report is the outcome of a run.
type Report struct {
	Environment Environment `json:"environment"` // where the run took place
	Results     []*Result   `json:"results"`     // one per scenario, in the order run
}

// OK reports whether every scenario passed its correctness checks.
func (r *Report) OK() bool {
	for _, res := range r.Results {
		if !res.OK {
			return false
		}
	}
	return len(r.Results) > 0
}

// Result is one scenario's figures. Rates are per message: for accept-batch a
// "call" is one message (latencies are per batch call), for drain one handled
// receipt.
type Result struct {
	Scenario    string `json:"scenario"`    // the scenario's name (Options.Scenarios)
	Description string `json:"description"` // what it measures, in words
	Concurrency int    `json:"concurrency"` // callers at once
	Rounds      int    `json:"rounds"`      // rounds measured (the figures cover them all)

	Calls       int     `json:"calls"`         // pginbox calls over all rounds
	Seconds     float64 `json:"seconds"`       // wall time of the pginbox side
	CallsPerSec float64 `json:"calls_per_sec"` // Calls / Seconds
	P50Ms       float64 `json:"p50_ms"`        // latency percentiles per call, in ms
	P95Ms       float64 `json:"p95_ms"`        // 95th percentile
	P99Ms       float64 `json:"p99_ms"`        // 99th percentile
	Errors      int     `json:"errors"`        // calls that returned an error
	Counts      Counts  `json:"counts"`        // outcomes confirmed in the database

	// Raw is the ceiling: the same statements from a plain pgx loop.
	Raw Measure `json:"raw"`
	// RawNotify, when measured, is the raw loop with pg_notify in every accept
	// statement: what per-accept NOTIFY costs.
	RawNotify *Measure `json:"raw_notify,omitempty"`
	// Ratio is CallsPerSec / Raw.CallsPerSec.
	Ratio float64 `json:"ratio"`

	Target      string `json:"target"`       // the target (docs/TARGETS.md), in words
	MeetsTarget bool   `json:"meets_target"` // the scenario's figures reach Target

	// Hooked is pginbox with Options.Hooks installed, when set; HookedRatio
	// is its rate over plain pginbox's (goal HookedTarget).
	Hooked            *Measure `json:"hooked,omitempty"`
	HookedRatio       float64  `json:"hooked_ratio,omitempty"`
	HookedTarget      string   `json:"hooked_target,omitempty"`
	HookedMeetsTarget bool     `json:"hooked_meets_target,omitempty"` // HookedRatio reaches HookedTarget

	// RLS is pginbox with row-level security enabled (Options.RLS); RLSRatio
	// is its rate over plain pginbox's (goal RLSTarget).
	RLS            *Measure `json:"rls,omitempty"`
	RLSRatio       float64  `json:"rls_ratio,omitempty"`
	RLSTarget      string   `json:"rls_target,omitempty"`
	RLSMeetsTarget bool     `json:"rls_meets_target,omitempty"` // RLSRatio reaches RLSTarget

	// Extra holds scenario-specific figures (retained-1m: empty vs retained).
	Extra map[string]float64 `json:"extra,omitempty"`
	// Notes lay some of Extra out for reading (citus: a table of the cost
	// per message by side and node); the table report prints them as they are.
	Notes []string `json:"notes,omitempty"`

	Verified string   `json:"verified"` // what the database confirmed, in words
	OK       bool     `json:"ok"`       // every correctness check passed
	Failures []string `json:"failures"` // what did not

	Environment Environment `json:"environment"` // where this scenario ran
}

// Counts are the outcomes of the pginbox phases, confirmed in the database.
type Counts struct {
	Accepted      int `json:"accepted"`          // first accepts
	Duplicates    int `json:"duplicates"`        // accepts answered as duplicates
	BusinessRows  int `json:"business_rows"`     // rows the handlers wrote
	ReceiptsInDB  int `json:"receipts_in_db"`    // after the last pginbox phase, retained fixtures included
	RawAccepted   int `json:"raw_accepted"`      // the raw loop's first inserts
	RawDuplicates int `json:"raw_duplicates"`    // the raw loop's conflicting inserts
	RawBusiness   int `json:"raw_business_rows"` // rows the raw loop wrote
}

func (r *Result) failf(format string, args ...any) {
	r.OK = false
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

// Run runs the selected scenarios and returns their results. It returns an
// error only when the run could not start; a scenario that fails its checks is
// reported in its Result (and Report.OK is false).
func Run(ctx context.Context, o Options) (*Report, error) {
	o = o.withDefaults()
	for _, name := range o.Scenarios {
		if !slices.Contains(Scenarios, name) {
			return nil, fmt.Errorf("bench: unknown scenario %q (known: %s)", name, strings.Join(Scenarios, ", "))
		}
	}
	prog := &progress{w: o.Progress, tty: o.TTY}

	dsn, target := o.DatabaseURL, "DATABASE_URL"
	if dsn == "" {
		prog.note("starting an ephemeral PostgreSQL cluster (fsync %s)", onOff(!o.NoFsync))
		copts := pgcluster.Options{Fsync: !o.NoFsync}
		if o.ProfileDir != "" {
			copts.Settings = map[string]string{"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all",
				"pg_stat_statements.track_planning": "on"}
		}
		cluster, err := pgcluster.Start(ctx, copts)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer cluster.Stop()
		if err := createDatabase(ctx, cluster.ConnString("postgres"), "pginbox_bench"); err != nil {
			return nil, err
		}
		dsn = cluster.ConnString("pginbox_bench")
		target = "ephemeral cluster in " + cluster.Dir() + " (unix socket)"
	}
	base, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: database URL: %w", err)
	}
	if err := migrate(ctx, base); err != nil {
		return nil, err
	}
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		if err := createExtension(ctx, base, "pg_stat_statements"); err != nil {
			prog.note("profile: %v (statement reports left out)", err)
		}
	}
	s, err := newSuite(ctx, o, base, prog)
	if err != nil {
		return nil, err
	}
	defer s.close()

	env, err := environment(ctx, s.admin, target)
	if err != nil {
		return nil, err
	}
	rep := &Report{Environment: env}
	for _, name := range o.Scenarios {
		for _, r := range s.run(ctx, name) {
			r.Environment = env
			rep.Results = append(rep.Results, r)
			if r.OK {
				prog.note("%s: %s", r.Scenario, r.Verified)
			} else {
				prog.note("%s: FAILED: %s", r.Scenario, strings.Join(r.Failures, "; "))
			}
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
	}
	if err := s.cleanup(ctx); err != nil {
		prog.note("cleanup: %v", err)
	}
	return rep, nil
}

// run runs one scenario; drain yields one result per worker concurrency.
func (s *suite) run(ctx context.Context, name string) []*Result {
	switch name {
	case ScenarioAcceptFresh:
		return []*Result{s.acceptFresh(ctx)}
	case ScenarioAcceptRetained:
		return []*Result{s.acceptRetained(ctx)}
	case ScenarioAcceptDup90:
		return []*Result{s.acceptDup90(ctx)}
	case ScenarioAcceptGroup:
		return []*Result{s.acceptGroup(ctx)}
	case ScenarioAcceptBatch:
		return []*Result{s.acceptBatch(ctx)}
	case ScenarioDrain:
		var out []*Result
		for _, c := range s.o.DrainConcurrency {
			out = append(out, s.drain(ctx, c, 1))
		}
		return out
	case ScenarioDrainBatched:
		var out []*Result
		for _, c := range s.o.DrainBatchedConcurrency {
			out = append(out, s.drain(ctx, c, s.o.DrainBatch))
		}
		return out
	case ScenarioJobs, ScenarioJobsBatched:
		perTx := 1
		if name == ScenarioJobsBatched {
			perTx = s.o.DrainBatch
		}
		var out []*Result
		for _, c := range s.o.JobWorkers {
			out = append(out, s.jobs(ctx, c, perTx))
		}
		return out
	case ScenarioIngest, ScenarioIngestBatched, ScenarioIngestAccept, ScenarioIngestAcceptBatched:
		via := viaAcceptBatch
		if name == ScenarioIngestAccept || name == ScenarioIngestAcceptBatched {
			via = viaAccept
		}
		perTx := 1
		if name == ScenarioIngestBatched || name == ScenarioIngestAcceptBatched {
			perTx = s.o.DrainBatch
		}
		var out []*Result
		for _, c := range s.o.JobWorkers {
			out = append(out, s.ingest(ctx, via, c, perTx))
		}
		return out
	case ScenarioRetained1M:
		return []*Result{s.retained1M(ctx)}
	case ScenarioXminHold:
		return []*Result{s.xminHold(ctx)}
	case ScenarioRelay:
		return []*Result{s.relay(ctx)}
	case ScenarioCitus:
		return s.citus(ctx)
	case ScenarioFairness:
		return []*Result{s.fairness(ctx)}
	case ScenarioOrdered:
		return []*Result{s.ordered(ctx)}
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// discardLogger keeps pginbox quiet during measurement.
var discardLogger = slog.New(slog.DiscardHandler)

// newPool opens a pool of exactly size connections, all connected before it
// returns so no measurement pays for connecting.
func newPool(ctx context.Context, base *pgxpool.Config, size int) (*pgxpool.Pool, error) {
	cfg := base.Copy()
	cfg.MaxConns = int32(size)
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = time.Hour
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: connecting: %w", err)
	}
	conns := make([]*pgxpool.Conn, 0, size)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range size {
		c, err := pool.Acquire(ctx)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("bench: connecting: %w", err)
		}
		conns = append(conns, c)
	}
	return pool, nil
}

// migrate brings the database of cfg to pginbox's schema.
func migrate(ctx context.Context, cfg *pgxpool.Config) error {
	sqlDB := stdlib.OpenDB(*cfg.ConnConfig)
	defer sqlDB.Close()
	m, err := schema.NewMigrator(sqlDB)
	if err != nil {
		return err
	}
	if _, err := m.Up(ctx); err != nil {
		return fmt.Errorf("bench: migrating %s: %w", cfg.ConnConfig.Database, err)
	}
	return nil
}

// newNamedPool is newPool with an application_name, so pg_stat_activity
// tells the bench's pools apart.
func newNamedPool(ctx context.Context, base *pgxpool.Config, size int, app string) (*pgxpool.Pool, error) {
	cfg := base.Copy()
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	return newPool(ctx, cfg, size)
}
