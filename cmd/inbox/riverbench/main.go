// Command riverbench measures River, the Go job queue, the way `inbox bench
// --scenarios jobs,jobs-batched` measures pginbox: workers whose jobs do
// nothing but wait --job-sleep, a backlog kept --backlog deep by a feeder, and
// completions per second over --duration, on an ephemeral PostgreSQL cluster
// with fsync on (or DATABASE_URL). It lives in a module of its own so River
// never enters pginbox's module graph. Run it beside `inbox bench` on the same
// quiet machine:
//
//	go run ./cmd/inbox/riverbench --workers 4,16,64 --duration 60s
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

type waitArgs struct{}

func (waitArgs) Kind() string { return "wait" }

type waitWorker struct {
	river.WorkerDefaults[waitArgs]
	sleep time.Duration
}

func (w *waitWorker) Work(ctx context.Context, _ *river.Job[waitArgs]) error {
	time.Sleep(w.sleep)
	return nil
}

func main() {
	var (
		workersFlag = flag.String("workers", "4,16,64", "comma-separated MaxWorkers to measure")
		duration    = flag.Duration("duration", 60*time.Second, "measured time per phase")
		sleep       = flag.Duration("job-sleep", time.Millisecond, "what a job waits")
		backlog     = flag.Int("backlog", 4000, "jobs kept available")
		cooldown    = flag.Duration("fetch-cooldown", 5*time.Millisecond, "River's FetchCooldown")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *workersFlag, *duration, *sleep, *backlog, *cooldown); err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, workersFlag string, duration, sleep time.Duration, backlog int, cooldown time.Duration) error {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		c, err := pgcluster.Start(ctx, pgcluster.Options{Fsync: true})
		if err != nil {
			return err
		}
		defer c.Stop()
		dsn = c.ConnString("postgres")
	}
	for _, w := range strings.Split(workersFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			return fmt.Errorf("--workers: %q is not a positive number", w)
		}
		rate, err := phase(ctx, dsn, n, duration, sleep, backlog, cooldown)
		if err != nil {
			return err
		}
		fmt.Printf("river MaxWorkers=%d job-sleep=%s backlog=%d fetch-cooldown=%s: %.0f jobs/s over %s\n",
			n, sleep, backlog, cooldown, rate, duration)
	}
	return nil
}

// phase measures one worker count on a fresh schema.
func phase(ctx context.Context, dsn string, workers int, duration, sleep time.Duration, backlog int, cooldown time.Duration) (float64, error) {
	// A fresh database per phase, like inbox bench's reset.
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer admin.Close(context.WithoutCancel(ctx))
	name := fmt.Sprintf("riverbench_%d", workers)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return 0, err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return 0, err
	}
	defer admin.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return 0, err
	}
	cfg.ConnConfig.Database = name
	cfg.MaxConns = int32(workers + 10)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return 0, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return 0, err
	}
	ws := river.NewWorkers()
	river.AddWorker(ws, &waitWorker{sleep: sleep})
	client, err := river.NewClient(driver, &river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:       ws,
		FetchCooldown: cooldown,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return 0, err
	}
	insert := func(n int) error {
		params := make([]river.InsertManyParams, n)
		for i := range params {
			params[i] = river.InsertManyParams{Args: waitArgs{}}
		}
		_, err := client.InsertManyFast(ctx, params)
		return err
	}
	if err := insert(backlog); err != nil {
		return 0, err
	}
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	defer client.Stop(context.WithoutCancel(ctx))

	feedCtx, stopFeeding := context.WithCancel(ctx)
	defer stopFeeding()
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-feedCtx.Done():
				return
			case <-t.C:
			}
			var available int
			if err := pool.QueryRow(feedCtx, "SELECT count(*) FROM river_job WHERE state = 'available'").Scan(&available); err != nil {
				return
			}
			if missing := backlog - available; missing > backlog/4 {
				if insert(missing) != nil {
					return
				}
			}
		}
	}()
	completed := func() (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n)
		return n, err
	}
	time.Sleep(2 * time.Second) // warm up
	before, err := completed()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	select {
	case <-time.After(duration):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	after, err := completed()
	if err != nil {
		return 0, err
	}
	return float64(after-before) / time.Since(start).Seconds(), nil
}
