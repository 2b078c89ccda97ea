package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// jobs measures a worker the way job-queue benchmarks measure theirs:
// handlers that do nothing but wait JobSleep, a backlog kept JobBacklog deep by
// a feeder, and completions per second over JobSeconds. Completion still
// commits in the handler's transaction. There is no raw ceiling: the figure
// compares with other queues measured the same way on the same machine.
func (s *suite) jobs(ctx context.Context, workers, perTx int) *Result {
	r := &Result{
		Scenario: fmt.Sprintf("jobs-c%d", workers),
		Description: fmt.Sprintf("Worker (Concurrency %d, MessagesPerTx %d): no-op handlers that wait %s, a backlog kept %s deep, completions/s over %s",
			workers, perTx, s.o.JobSleep, thousands(s.o.JobBacklog), s.o.JobDuration),
		Concurrency: workers, Rounds: s.o.Rounds, OK: true, Failures: []string{},
		Target: "ahead of River 0.51.2 measured the same way on the same machine",
	}
	if perTx > 1 {
		r.Scenario = fmt.Sprintf("jobs-batched-c%d", workers)
	}
	var total sample
	var writes tableStats
	statsOK := true
	for round := range s.o.Rounds {
		if err := s.reset(ctx, 0); err != nil {
			r.failf("%v", err)
			return r
		}
		statsOK = statsOK && s.resetStats(ctx)
		got, err := s.jobsPhase(ctx, fmt.Sprintf("%s round %d/%d", r.Scenario, round+1, s.o.Rounds),
			fmt.Sprintf("%s-round%d", r.Scenario, round+1), workers, perTx)
		if err != nil {
			r.failf("%v", err)
			return r
		}
		if statsOK {
			t, err := s.receiptStats(ctx)
			if err != nil {
				r.failf("%v", err)
				return r
			}
			writes.add(t.withoutInserts()) // the feeder's
		}
		total.add(got)
	}
	m := total.measure("")
	r.Calls, r.Seconds, r.CallsPerSec, r.Errors = m.Calls, round2(m.Seconds), round2(m.CallsPerSec), m.Errors
	r.Raw.Description = "none: a job-queue benchmark's figure, compared with River's"
	if statsOK {
		rowVersions(r, writes, total.calls)
	}
	if total.firstErr != nil {
		r.failf("%d errors, first: %v", total.errors, total.firstErr)
	}
	r.Verified = fmt.Sprintf("%s completions in %.1fs, every one COMPLETED in the database with its handler run", thousands(total.calls), m.Seconds)
	return r
}

// jobsPhase runs one measured phase and returns the completions it counted.
func (s *suite) jobsPhase(ctx context.Context, label, profileName string, workers, perTx int) (sample, error) {
	if _, err := s.seed(ctx, "jobs-0", s.o.JobBacklog, inbox.StatusPending); err != nil {
		return sample{}, err
	}
	pool, err := newNamedPool(ctx, s.base, workers+2, appDrain)
	if err != nil {
		return sample{}, err
	}
	defer pool.Close()
	var handled atomic.Int64
	reg := handler.NewRegistry()
	err = reg.Register(handler.Key{Consumer: benchConsumer, EventType: benchEventType, SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			time.Sleep(s.o.JobSleep)
			handled.Add(1)
			return nil
		})
	if err != nil {
		return sample{}, err
	}
	// ClaimBatch is the worker's default (workers x perTx).
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Concurrency: workers, MessagesPerTx: perTx, Logger: discardLogger})
	if err != nil {
		return sample{}, err
	}
	if err := w.Start(ctx); err != nil {
		return sample{}, err
	}
	stopWorker := func() error {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return w.Stop(stopCtx)
	}

	// The feeder keeps the backlog deep: the worker never runs dry.
	feedCtx, stopFeeding := context.WithCancel(ctx)
	feedErr := make(chan error, 1)
	go func() {
		chunk := 1
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-feedCtx.Done():
				feedErr <- nil
				return
			case <-t.C:
			}
			var pending int
			err := s.admin.QueryRow(feedCtx, "SELECT count(*) FROM pginbox_work WHERE status = 'PENDING'").Scan(&pending)
			if missing := s.o.JobBacklog - pending; err == nil && missing > s.o.JobBacklog/4 {
				_, err = s.seed(feedCtx, fmt.Sprintf("jobs-%d", chunk), missing, inbox.StatusPending)
				chunk++
			}
			if err != nil {
				if feedCtx.Err() != nil {
					err = nil // stopped while feeding
				}
				feedErr <- err
				return
			}
		}
	}()

	select { // warm up: claims flowing, connections busy
	case <-time.After(s.o.JobWarmup):
	case <-ctx.Done():
	}
	stopProfile := s.startProfile(profileName)
	begin := handled.Load()
	stopProgress := s.prog.phase(label, 0, func() int { return int(handled.Load() - begin) })
	start := time.Now()
	select {
	case <-time.After(s.o.JobDuration):
	case <-ctx.Done():
	}
	done := handled.Load() - begin
	elapsed := time.Since(start)
	stopProgress()
	stopProfile(int(done))
	stopFeeding()
	ferr := <-feedErr
	if err := stopWorker(); err != nil {
		return sample{}, err
	}
	if ferr != nil {
		return sample{}, ferr
	}
	if err := ctx.Err(); err != nil {
		return sample{}, err
	}
	// Every handled job committed: the worker stopped cleanly.
	var completed int64
	if err := s.admin.QueryRow(ctx, "SELECT count(*) FROM pginbox_receipts WHERE status = 'COMPLETED'").Scan(&completed); err != nil {
		return sample{}, err
	}
	if completed != handled.Load() {
		return sample{}, fmt.Errorf("%d handler calls but %d COMPLETED receipts", handled.Load(), completed)
	}
	return sample{calls: int(done), elapsed: elapsed}, nil
}
