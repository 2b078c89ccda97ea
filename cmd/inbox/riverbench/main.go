// Command riverbench measures River, the Go job queue, the way `inbox bench`
// measures pginbox's workers, on an ephemeral PostgreSQL cluster with fsync on
// (or DATABASE_URL), one fresh database per phase. It lives in a module of its
// own so River never enters pginbox's module graph. Two scenarios:
//
//   - jobs (like `inbox bench --scenarios jobs`): jobs that only wait
//     --job-sleep, a backlog kept --backlog deep by a feeder (InsertManyFast
//     every 20 ms), completions per second over --duration.
//   - ingest (like `inbox bench --scenarios ingest`): a producer keeps the
//     available backlog --backlog deep through InsertManyFast (up to
//     --ingest-batch jobs a call, paced by a depth poll every 200 ms) WHILE
//     the workers run; the median of the completions/s samples after
//     --warmup, the backlog held, pickup latency and dead tuples per 1,000
//     completed jobs.
//
// Run it right after `inbox bench` on the same quiet machine:
//
//	cd cmd/inbox/riverbench && go run . --scenario ingest --workers 4,16,64 --duration 60s --warmup 20s
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/pginbox/pginbox/internal/pgcluster"
)

type options struct {
	scenario      string
	workers       []int
	duration      time.Duration
	warmup        time.Duration
	sleep         time.Duration
	backlog       int
	cooldown      time.Duration
	pollInterval  time.Duration
	ingestBatch   int
	ingestCallers int
	profileDir    string
}

func main() {
	var (
		o           options
		workersFlag string
	)
	flag.StringVar(&o.scenario, "scenario", "jobs", "jobs or ingest")
	flag.StringVar(&workersFlag, "workers", "4,16,64", "comma-separated MaxWorkers to measure")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "measured time per phase")
	flag.DurationVar(&o.warmup, "warmup", 10*time.Second, "unmeasured time before each phase")
	flag.DurationVar(&o.sleep, "job-sleep", time.Millisecond, "what a job waits")
	flag.IntVar(&o.backlog, "backlog", 4000, "jobs kept available")
	flag.DurationVar(&o.cooldown, "fetch-cooldown", 5*time.Millisecond, "River's FetchCooldown")
	flag.DurationVar(&o.pollInterval, "fetch-poll-interval", 50*time.Millisecond, "River's FetchPollInterval")
	flag.IntVar(&o.ingestBatch, "ingest-batch", 128, "ingest: jobs per InsertManyFast call")
	flag.IntVar(&o.ingestCallers, "ingest-callers", 1, "ingest: producers calling InsertManyFast at once")
	flag.StringVar(&o.profileDir, "profile", "", "ingest: write a pg_stat_statements report of every phase's measured window to this directory (the ephemeral cluster then loads the extension)")
	flag.Parse()
	for _, w := range strings.Split(workersFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "riverbench: --workers: %q is not a positive number\n", w)
			os.Exit(2)
		}
		o.workers = append(o.workers, n)
	}
	if o.scenario != "jobs" && o.scenario != "ingest" {
		fmt.Fprintf(os.Stderr, "riverbench: --scenario: %q is neither jobs nor ingest\n", o.scenario)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		copts := pgcluster.Options{Fsync: true}
		if o.profileDir != "" {
			copts.Settings = map[string]string{"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}
		}
		c, err := pgcluster.Start(ctx, copts)
		if err != nil {
			return err
		}
		defer c.Stop()
		dsn = c.ConnString("postgres")
	}
	for _, n := range o.workers {
		if o.scenario == "ingest" {
			res, err := ingestPhase(ctx, dsn, n, o)
			if err != nil {
				return err
			}
			res.print(os.Stdout)
			continue
		}
		rate, err := jobsPhase(ctx, dsn, n, o)
		if err != nil {
			return err
		}
		fmt.Printf("river MaxWorkers=%d job-sleep=%s backlog=%d fetch-cooldown=%s: %.0f jobs/s over %s\n",
			n, o.sleep, o.backlog, o.cooldown, rate, o.duration)
	}
	return nil
}

type waitArgs struct {
	SentAtUs int64 `json:"sent_at_us,omitempty"` // when the producer sent it (ingest)
}

func (waitArgs) Kind() string { return "wait" }

type waitWorker struct {
	river.WorkerDefaults[waitArgs]
	sleep   time.Duration
	started func(job *river.Job[waitArgs]) // before the wait; nil: none
	done    func()                         // after it; nil: none
}

func (w *waitWorker) Work(ctx context.Context, job *river.Job[waitArgs]) error {
	if w.started != nil {
		w.started(job)
	}
	time.Sleep(w.sleep)
	if w.done != nil {
		w.done()
	}
	return nil
}

// phaseDB is a fresh database for one phase, migrated, and a River client on
// it; close drops it.
type phaseDB struct {
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	close  func()
}

func newPhaseDB(ctx context.Context, dsn string, workers int, o options, worker *waitWorker) (*phaseDB, error) {
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("riverbench_%d", workers)
	drop := func() {
		admin.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close(context.WithoutCancel(ctx))
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		drop()
		return nil, err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		drop()
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		drop()
		return nil, err
	}
	cfg.ConnConfig.Database = name
	cfg.MaxConns = int32(workers + 10)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, err
	}
	fail := func(err error) (*phaseDB, error) {
		pool.Close()
		drop()
		return nil, err
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return fail(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fail(err)
	}
	if o.profileDir != "" {
		if _, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
			return fail(fmt.Errorf("--profile: %w", err))
		}
	}
	ws := river.NewWorkers()
	river.AddWorker(ws, worker)
	client, err := river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
		FetchCooldown:     o.cooldown,
		FetchPollInterval: o.pollInterval,
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return fail(err)
	}
	return &phaseDB{pool: pool, client: client, close: func() { pool.Close(); drop() }}, nil
}
