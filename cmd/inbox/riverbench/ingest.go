package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
)

// Like inbox bench's ingest scenarios: 5 s samples (a quarter of shorter
// phases), a depth poll every 200 ms.
const (
	sampleEvery    = 5 * time.Second
	depthPollEvery = 200 * time.Millisecond
)

// ingestResult is one phase's figures, named as inbox bench names them.
type ingestResult struct {
	workers                int
	window                 time.Duration
	completions            int
	rates, depths          []float64
	pickups, calls         []time.Duration
	accepted, handled      int64
	acceptedInWindow       int64
	deadEnd                int64
	completedAtEnd         int64
	loadStart, loadEnd     float64
	cpuGo, cpuPG, cpuTotal time.Duration // over the window
	o                      options
}

func (r *ingestResult) print(w io.Writer) {
	slices.Sort(r.pickups)
	slices.Sort(r.calls)
	secs := r.window.Seconds()
	fmt.Fprintf(w, "river ingest-c%d (MaxWorkers %d, FetchCooldown %s, InsertManyFast of up to %d from %d producer(s), backlog target %d, jobs wait %s):\n",
		r.workers, r.workers, r.o.cooldown, r.o.ingestBatch, r.o.ingestCallers, r.o.backlog, r.o.sleep)
	fmt.Fprintf(w, "  completions/s median %.0f (mean %.0f, %d in %.0fs), accepted/s %.0f, backlog median %.0f (min %.0f)\n",
		median(r.rates), float64(r.completions)/secs, r.completions, secs, float64(r.acceptedInWindow)/secs, median(r.depths), minOr(r.depths, float64(r.o.backlog)))
	fmt.Fprintf(w, "  pickup p50 %.2f ms p95 %.2f ms p99 %.2f ms; insert call p50 %.2f ms p95 %.2f ms\n",
		ms(pct(r.pickups, 50)), ms(pct(r.pickups, 95)), ms(pct(r.pickups, 99)), ms(pct(r.calls, 50)), ms(pct(r.calls, 95)))
	perK := 0.0
	if r.completedAtEnd > 0 {
		perK = float64(r.deadEnd) * 1000 / float64(r.completedAtEnd)
	}
	fmt.Fprintf(w, "  dead tuples %d at the window's end = %.0f per 1,000 completed since the start; CPU in the window: this process %.2fs, its backends %.2fs, machine %.2fs of %.0fs\n",
		r.deadEnd, perK, r.cpuGo.Seconds(), r.cpuPG.Seconds(), r.cpuTotal.Seconds(), 2*secs)
	fmt.Fprintf(w, "  load average %.2f at the start, %.2f at the end; verified: %d inserted, %d worked, every one completed in the database\n",
		r.loadStart, r.loadEnd, r.accepted, r.handled)
}

// ingestPhase measures one worker count: the producer inserts while the
// workers run, as a River user's application would.
func ingestPhase(ctx context.Context, dsn string, workers int, o options) (*ingestResult, error) {
	var (
		measuring          atomic.Bool
		handled, accepted  atomic.Int64
		sent, due, atPoll  atomic.Int64
		polled             atomic.Bool
		mu                 sync.Mutex
		pickups, callTimes []time.Duration
		depths             []float64
		firstErr           atomic.Pointer[error]
	)
	fail := func(err error) { firstErr.CompareAndSwap(nil, &err) }
	worker := &waitWorker{sleep: o.sleep,
		started: func(job *river.Job[waitArgs]) {
			if measuring.Load() && job.Args.SentAtUs > 0 {
				d := time.Since(time.UnixMicro(job.Args.SentAtUs))
				mu.Lock()
				pickups = append(pickups, d)
				mu.Unlock()
			}
		},
		done: func() { handled.Add(1) },
	}
	db, err := newPhaseDB(ctx, dsn, workers, o, worker)
	if err != nil {
		return nil, err
	}
	defer db.close()
	pool, client := db.pool, db.client
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	clientStopped := false
	defer func() {
		if !clientStopped {
			client.Stop(context.WithoutCancel(ctx))
		}
	}()

	feedCtx, stopFeeding := context.WithCancel(ctx)
	defer stopFeeding()
	var feeders sync.WaitGroup
	feeders.Add(1)
	go func() { // the depth poll
		defer feeders.Done()
		t := time.NewTicker(depthPollEvery)
		defer t.Stop()
		for {
			before := sent.Load()
			var n int64
			if err := pool.QueryRow(feedCtx, "SELECT count(*) FROM river_job WHERE state = 'available'").Scan(&n); err != nil {
				if feedCtx.Err() == nil {
					fail(fmt.Errorf("polling the backlog: %w", err))
				}
				return
			}
			due.Store(n)
			atPoll.Store(before)
			polled.Store(true)
			if measuring.Load() {
				mu.Lock()
				depths = append(depths, float64(n))
				mu.Unlock()
			}
			select {
			case <-feedCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	reserve := func(n int) int {
		if !polled.Load() {
			return 0
		}
		for {
			s := sent.Load()
			missing := int64(o.backlog) - (due.Load() + s - atPoll.Load())
			if missing <= 0 {
				return 0
			}
			k := int(min(missing, int64(n)))
			if sent.CompareAndSwap(s, s+int64(k)) {
				return k
			}
		}
	}
	for range o.ingestCallers {
		feeders.Add(1)
		go func() {
			defer feeders.Done()
			params := make([]river.InsertManyParams, 0, o.ingestBatch)
			for feedCtx.Err() == nil {
				n := reserve(o.ingestBatch)
				if n == 0 {
					select {
					case <-feedCtx.Done():
						return
					case <-time.After(5 * time.Millisecond):
					}
					continue
				}
				at := time.Now()
				params = params[:0]
				for range n {
					params = append(params, river.InsertManyParams{Args: waitArgs{SentAtUs: at.UnixMicro()}})
				}
				if _, err := client.InsertManyFast(feedCtx, params); err != nil {
					if feedCtx.Err() == nil {
						fail(err)
					}
					return
				}
				took := time.Since(at)
				accepted.Add(int64(n))
				if measuring.Load() {
					mu.Lock()
					callTimes = append(callTimes, took)
					mu.Unlock()
				}
			}
		}()
	}

	select { // warm-up
	case <-time.After(o.warmup):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if p := firstErr.Load(); p != nil {
		return nil, *p
	}
	r := &ingestResult{workers: workers, o: o, loadStart: loadAverage()}
	cpu0, err := cpuNow(ctx, pool)
	if err != nil {
		return nil, err
	}
	if o.profileDir != "" {
		if _, err := pool.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			return nil, err
		}
	}
	every := min(sampleEvery, o.duration/4)
	begin, acceptedBefore := handled.Load(), accepted.Load()
	measuring.Store(true)
	start := time.Now()
	last, lastAt := begin, start
	tick := time.NewTicker(every)
	for lastAt.Sub(start) < o.duration-every/2 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case now := <-tick.C:
			h := handled.Load()
			r.rates = append(r.rates, float64(h-last)/now.Sub(lastAt).Seconds())
			last, lastAt = h, now
		}
	}
	tick.Stop()
	measuring.Store(false)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cpu1, err := cpuNow(ctx, pool)
	if err != nil {
		return nil, err
	}
	r.cpuGo, r.cpuPG, r.cpuTotal = cpu1.self-cpu0.self, cpu1.backends-cpu0.backends, cpu1.machine-cpu0.machine
	r.window, r.completions = lastAt.Sub(start), int(last-begin)
	r.acceptedInWindow = accepted.Load() - acceptedBefore
	r.completedAtEnd = last
	r.loadEnd = loadAverage()
	if o.profileDir != "" {
		if err := writeStatements(ctx, pool, filepath.Join(o.profileDir, fmt.Sprintf("river-ingest-c%d.statements.txt", workers)), r.completions); err != nil {
			return nil, err
		}
	}
	if err := pool.QueryRow(ctx, "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE relname = 'river_job'").Scan(&r.deadEnd); err != nil {
		return nil, err
	}

	stopFeeding()
	feeders.Wait()
	clientStopped = true
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return nil, err
	}
	if p := firstErr.Load(); p != nil {
		return nil, *p
	}
	mu.Lock()
	r.pickups, r.calls, r.depths = pickups, callTimes, depths
	mu.Unlock()
	r.accepted, r.handled = accepted.Load(), handled.Load()
	var rows, completed int64
	if err := pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE state = 'completed') FROM river_job").Scan(&rows, &completed); err != nil {
		return nil, err
	}
	if rows < r.accepted || rows > r.accepted+int64(o.ingestBatch*o.ingestCallers) {
		return nil, fmt.Errorf("%d jobs inserted but %d in river_job", r.accepted, rows)
	}
	if completed != r.handled {
		return nil, fmt.Errorf("%d jobs worked but %d completed in river_job", r.handled, completed)
	}
	return r, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minOr(v []float64, d float64) float64 {
	if len(v) == 0 {
		return d
	}
	return slices.Min(v)
}

// pct is the nearest-rank percentile of sorted d.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(d)))) - 1
	return d[max(0, min(i, len(d)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	l, _ := strconv.ParseFloat(f, 64)
	return l
}
