package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/schema"
)

var (
	errWorkerNotIdle = errors.New("pginbox: worker is running: Drain is for a worker that was not started")
	errWorkerStarted = errors.New("pginbox: worker already started")
)

// Worker claims due receipts of the consumers it owns and runs their handlers,
// one transaction per message (or per batch, with MessagesPerTx). Create it
// with NewWorker, run it with Start and Stop (or Run), or process what is due
// synchronously with Drain.
//
// The work is split by concern: the claimer (claimer.go) fills a local queue,
// handler slots (executor.go, executor_batch.go) take from it, the heartbeat
// (leases.go) extends what the worker holds, recovery (recovery.go) returns
// expired leases, and the listener (listener.go) wakes the claimer.
type Worker struct {
	pool     *pgxpool.Pool
	reg      *handler.Registry
	cfg      WorkerConfig
	owned    []string
	ownedSet map[string]bool
	log      *slog.Logger
	hooks    testHooks

	leases   *leaseSet
	queue    *readyQueue
	running  atomic.Int64 // receipts in a handler slot now
	stopping atomic.Bool

	// handlerCtx is the parent of every handler context; cancelling it
	// interrupts running handlers (hard shutdown).
	handlerCtx     context.Context
	cancelHandlers context.CancelCauseFunc

	wake      chan struct{} // new work may be due
	slotFreed chan struct{} // a handler slot or queue place came free

	mu      sync.Mutex
	started bool
	run     *runState
}

// runState is what one Start created and Stop tears down.
type runState struct {
	stopLoops     context.CancelFunc
	loops         sync.WaitGroup // claimer, recovery, listener
	slots         sync.WaitGroup // handler slots
	stopHeartbeat func()
	stopped       chan struct{} // closed when Stop finished
}

// testHooks stop a worker at a crash point in the crash tests.
type testHooks struct {
	afterClaim   func(claimed int)
	beforeCommit func(id ID)
	noHeartbeat  bool // a worker stalled by a pause or a partition
}

// NewWorker returns a worker dispatching to reg. It fails when an owned consumer
// has no handler, cfg is invalid (*ConfigError), or the pool is too small for
// the configured concurrency.
func NewWorker(pool *pgxpool.Pool, reg *handler.Registry, cfg WorkerConfig) (*Worker, error) {
	if pool == nil {
		return nil, errors.New("pginbox: NewWorker: pool is nil: pass a *pgxpool.Pool from pgxpool.New")
	}
	if reg == nil {
		return nil, errors.New("pginbox: NewWorker: registry is nil: pass the handler.Registry your handlers are registered in")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	maxConns := int(pool.Config().MaxConns)
	if cfg.Concurrency > 0 && maxConns < cfg.Concurrency+workerSpareConns {
		return nil, fmt.Errorf("pginbox: NewWorker: pool MaxConns %d is below Concurrency %d + %d (listener, claims and heartbeats): raise pool_max_conns or lower WorkerConfig.Concurrency",
			maxConns, cfg.Concurrency, workerSpareConns)
	}
	if maxConns < 1+workerSpareConns {
		return nil, fmt.Errorf("pginbox: NewWorker: pool MaxConns %d leaves no connection for a handler (the worker keeps %d for its listener, claims and heartbeats): raise pool_max_conns to at least %d",
			maxConns, workerSpareConns, 1+workerSpareConns)
	}
	cfg = cfg.withDefaults(maxConns)
	owned := cfg.Consumers
	if len(owned) == 0 {
		owned = reg.Consumers()
	}
	if len(owned) == 0 {
		return nil, errors.New("pginbox: NewWorker: no consumers to own: register handlers or set WorkerConfig.Consumers")
	}
	ownedSet := make(map[string]bool, len(owned))
	for _, c := range owned {
		if !reg.HasConsumer(c) {
			return nil, fmt.Errorf("pginbox: NewWorker: consumer %q is owned by this worker but has no handler: register its handlers or remove it from WorkerConfig.Consumers", c)
		}
		ownedSet[c] = true
	}
	hctx, cancel := context.WithCancelCause(context.Background())
	return &Worker{
		pool:           pool,
		reg:            reg,
		cfg:            cfg,
		owned:          append([]string(nil), owned...),
		ownedSet:       ownedSet,
		log:            cfg.Logger,
		leases:         newLeaseSet(),
		handlerCtx:     hctx,
		cancelHandlers: cancel,
		wake:           make(chan struct{}, 1),
		slotFreed:      make(chan struct{}, 1),
	}, nil
}

// Consumers returns the consumers this worker owns.
func (w *Worker) Consumers() []string { return append([]string(nil), w.owned...) }

// Start checks the schema version and starts claiming in the background. ctx
// bounds the start-up checks only; call Stop to stop.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errWorkerStarted
	}
	if err := schema.Check(ctx, w.pool); err != nil {
		return err
	}
	w.started = true
	loopCtx, cancel := context.WithCancel(context.Background())
	r := &runState{stopLoops: cancel, stopped: make(chan struct{})}
	w.run = r
	r.stopHeartbeat = w.startHeartbeat()
	w.queue = newReadyQueue(w.cfg.Concurrency*w.cfg.MessagesPerTx + w.cfg.ClaimBatch)
	for range w.cfg.Concurrency {
		r.slots.Add(1)
		go w.slot(&r.slots)
	}
	r.loops.Add(2)
	go w.claimLoop(loopCtx, &r.loops)
	go w.recoverLoop(loopCtx, &r.loops)
	if !w.cfg.PollOnly {
		r.loops.Add(1)
		go w.listenLoop(loopCtx, &r.loops)
	}
	w.log.Info("pginbox worker started", "consumers", w.owned, "concurrency", w.cfg.Concurrency,
		"messages_per_tx", w.cfg.MessagesPerTx, "poll_only", w.cfg.PollOnly)
	return nil
}

// Stop stops claiming, lets running handlers finish within ShutdownGrace, then
// cancels the rest (their receipts are released for another attempt). It returns
// once every handler has returned, or with ctx's error if ctx ends first.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.started {
		w.mu.Unlock()
		return nil
	}
	r := w.run
	if w.stopping.Swap(true) {
		w.mu.Unlock()
		select {
		case <-r.stopped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.mu.Unlock()

	r.stopLoops()
	r.loops.Wait()
	w.queue.close() // handler slots release what is still queued, then exit
	done := make(chan struct{})
	go func() {
		r.slots.Wait()
		r.stopHeartbeat()
		close(done)
		close(r.stopped) // also for a later Stop when this one gave up early
	}()
	grace := time.NewTimer(w.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		w.log.Warn("pginbox worker: shutdown grace elapsed, cancelling running handlers", "grace", w.cfg.ShutdownGrace)
		w.cancelHandlers(ErrWorkerShutdown)
	case <-ctx.Done():
		w.cancelHandlers(ErrWorkerShutdown)
	}
	select {
	case <-done:
		w.log.Info("pginbox worker stopped")
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pginbox: worker stop: handlers still running: %w", ctx.Err())
	}
}

// Run starts the worker, blocks until ctx is done, then stops it gracefully.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 2*w.cfg.ShutdownGrace)
	defer cancel()
	return w.Stop(stopCtx)
}

// Drain processes due receipts of the owned consumers synchronously until none
// is due, and returns how many it handled. It is meant for tests and one-shot
// jobs, on a worker that was not started.
func (w *Worker) Drain(ctx context.Context) (int, error) {
	w.mu.Lock()
	started := w.started
	w.mu.Unlock()
	if started {
		return 0, errWorkerNotIdle
	}
	defer w.startHeartbeat()()
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		leases, err := w.claim(ctx, w.cfg.Concurrency)
		if err != nil {
			return total, err
		}
		if len(leases) == 0 {
			return total, nil
		}
		var wg sync.WaitGroup
		for _, l := range leases {
			wg.Go(func() { w.process(l) })
		}
		wg.Wait()
		total += len(leases)
	}
}

// signal sends on a wake-up channel without blocking; one pending signal is
// enough.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
