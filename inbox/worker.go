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

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/internal/driver"
	"github.com/pginbox/pginbox/internal/service"
	"github.com/pginbox/pginbox/schema"
)

// Worker claims due receipts of the consumers it owns and runs their handlers,
// one transaction per message (or per batch, with MessagesPerTx). Create it
// with NewWorker, run it with Start and Stop (or Run), or process what is due
// now with Drain, which returns when nothing is.
//
// The work is split by concern: the claimer (claimer.go) fills a local queue,
// handler slots (executor.go, executor_batch.go) take from it, the heartbeat
// (leases.go) extends what the worker holds, recovery (recovery.go) returns
// expired leases, and the listener (listener.go) wakes the claimer.
type Worker struct {
	pool     *pgxpool.Pool // handler transactions and failures, scoped
	sys      *pgxpool.Pool // claims, heartbeats, recovery, releases, LISTEN
	reg      *handler.Registry
	cfg      WorkerConfig
	owned    []string
	ownedSet map[string]bool
	log      *slog.Logger
	hooks    testHooks

	leases  *leaseSet
	queue   *readyQueue
	running atomic.Int64 // receipts in a handler slot now
	// abandonedSlots counts handler slots whose handler hung: they take no
	// work until it returns.
	abandonedSlots atomic.Int64
	active         activeRuns
	txLimitMs      int64 // a handler transaction's statement and idle timeouts
	plans          planRenewal
	events         eventHub
	restriction    restrictionWatch
	// drv is the layout's driver, probed at the first claim (every job
	// comes from a claim); claims is its claimer, made then. Only the
	// claim loop or Drain claims, never both at once.
	drv driver.Lazy
	// claims are the claimers: the pool's server's first, then one per
	// Citus worker node (nodes). claimsMu guards the slice (the listeners
	// tell the claimers of wake-ups).
	claimsMu sync.Mutex
	claims   []driver.Claimer
	nodes    *Nodes
	nextNode int // the node a claim asks first (claimNodes)
	// idle is, per node, whether and since when its last claim found
	// nothing due; woken, whether a wake-up came from it since. The claim
	// loop skips an idle node until either or its poll interval.
	idle nodeIdle

	// handlerCtx is the parent of every handler context; cancelling it
	// interrupts running handlers (hard shutdown).
	handlerCtx     context.Context
	cancelHandlers context.CancelCauseFunc

	wake      chan struct{} // new work may be due
	notified  atomic.Bool   // a notification came since the last claim (claimLoop)
	slotFreed chan struct{} // a handler slot or queue place came free

	base service.Base // what the listener and recovery log with
	life service.Lifecycle
	run  *runState
}

// runState is what one Start created and Stop tears down.
type runState struct {
	loops         *service.Loops // claimer, recovery, listener
	slots         sync.WaitGroup // handler slots
	stopHeartbeat func()
}

// testHooks stop a worker at a crash point in the crash tests.
type testHooks struct {
	afterClaim   func(claimed int)
	listed       func(scopes int) // after a read of the scopes with due work (Citus)
	beforeCommit func(id ID)
	afterCommit  func(id ID)
	beforeListen func()
	noHeartbeat  bool // a worker stalled by a pause or a partition
}

// NewWorker returns a worker dispatching to reg. It fails with a *ConfigError
// naming the field when cfg is invalid, an owned consumer has no handler, or a
// pool is too small for the configured concurrency (see WorkerConfig).
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
	if err := cfg.checkPools(maxConns); err != nil {
		return nil, err
	}
	owned, err := cfg.owned(reg)
	if err != nil {
		return nil, err
	}
	sys := cfg.SystemPool
	if sys == nil {
		sys = pool
	}
	cfg = cfg.withDefaults(maxConns)
	ownedSet := make(map[string]bool, len(owned))
	for _, c := range owned {
		ownedSet[c] = true
	}
	hctx, cancel := context.WithCancelCause(context.Background())
	// The transaction's own timeouts end it shortly after its handler's
	// deadline, even if the handler ignores its context and never returns.
	ms := cfg.HandlerTimeout.Milliseconds() + 1000
	return &Worker{
		txLimitMs:      ms,
		pool:           pool,
		sys:            sys,
		reg:            reg,
		cfg:            cfg,
		owned:          owned,
		ownedSet:       ownedSet,
		log:            cfg.Logger,
		drv:            driver.Lazy{Log: shardNodeLog(cfg.Logger, cfg.Nodes)},
		nodes:          cfg.Nodes,
		leases:         newLeaseSet(),
		base:           service.Base{Name: "worker", Log: cfg.Logger},
		life:           service.Lifecycle{Name: "worker"},
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
	return w.life.Start(func() error {
		if err := schema.Check(ctx, w.sys); err != nil {
			return err
		}
		restricted, err := db.New(w.sys).ScopeRestricted(ctx)
		if err != nil {
			return dbError("checking row-level security", err)
		}
		if restricted {
			return errWorkerRestricted{}
		}
		var listeners []*service.Listener
		if !w.cfg.PollOnly {
			if listeners, err = w.listeners(); err != nil {
				return dbError("listening on the Citus nodes", err)
			}
		}
		r := &runState{loops: service.NewLoops()}
		w.run = r
		r.stopHeartbeat = w.startHeartbeat()
		w.queue = newReadyQueue(w.cfg.Concurrency*w.cfg.MessagesPerTx + w.cfg.ClaimBatch)
		for range w.cfg.Concurrency {
			r.slots.Go(w.slot)
		}
		r.loops.Go(w.claimLoop)
		r.loops.Go(w.recovery().Run)
		for _, l := range listeners {
			r.loops.Go(l.Run)
		}
		w.log.Info("pginbox worker started", "consumers", w.owned, "concurrency", w.cfg.Concurrency,
			"messages_per_tx", w.cfg.MessagesPerTx, "poll_only", w.cfg.PollOnly)
		return nil
	})
}

// stopReleaseWait is how long Stop waits for cancelled handlers to return and
// release their receipts, even when its ctx is already done, so a caller that
// closes the pool right after Stop leaves nothing to lease expiry.
const stopReleaseWait = 2 * time.Second

// Stop stops claiming, lets running handlers finish within ShutdownGrace, then
// cancels the rest: their receipts are released for another attempt. A handler
// that ignores the cancellation is abandoned (its attempt recorded as failed)
// so Stop returns anyway, with an error saying so. When ctx ends before the
// grace period, the handlers are cancelled at once. Stop stops the heartbeat
// before it returns in every case.
func (w *Worker) Stop(ctx context.Context) error {
	return w.life.Stop(ctx, func() (bool, error) { return true, w.stop(ctx) })
}

// stop is the first Stop's work; Stop waits for it in any later call.
func (w *Worker) stop(ctx context.Context) error {
	r := w.run
	defer r.stopHeartbeat()

	r.loops.Stop()
	// A claim stuck on a dead connection must not hold Stop past ctx; what it
	// claims later is handed back (the queue refuses it).
	select {
	case <-r.loops.Done():
	case <-ctx.Done():
	}
	w.queue.close() // handler slots release what is still queued, then exit
	slotsDone := service.Done(&r.slots)
	grace := time.NewTimer(w.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-slotsDone:
		w.log.Info("pginbox worker stopped")
		return nil
	case <-grace.C:
		w.log.Warn("pginbox worker: shutdown grace elapsed, cancelling running handlers", "grace", w.cfg.ShutdownGrace)
	case <-ctx.Done():
		w.log.Warn("pginbox worker: stop deadline reached, cancelling running handlers")
	}
	w.cancelHandlers(ErrWorkerShutdown)
	release := time.NewTimer(stopReleaseWait)
	defer release.Stop()
	select {
	case <-slotsDone:
		w.log.Info("pginbox worker stopped")
		return ctx.Err()
	case <-release.C:
	}
	// What is still running ignores its context: give up on it.
	abandoned := make(chan struct{})
	go func() {
		w.active.abandonAll(errors.New("handler did not return after the worker was stopped and its context cancelled"))
		w.releaseQueued()
		close(abandoned)
	}()
	// Recording their attempts is quick once their sessions are ended: wait
	// for it a moment even past ctx, for the same reason as above.
	settled := time.NewTimer(stopReleaseWait)
	defer settled.Stop()
	select {
	case <-abandoned:
	case <-settled.C:
	}
	err := fmt.Errorf("pginbox: worker stop: %d handler slots did not return after cancellation; their receipts were recorded as failed attempts", w.abandonedSlots.Load())
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", err, ctx.Err())
	}
	return err
}

// Run starts the worker, blocks until ctx is done, then stops it gracefully.
func (w *Worker) Run(ctx context.Context) error {
	return service.Run(ctx, w, 2*w.cfg.ShutdownGrace)
}

// Drain processes due receipts of the owned consumers until none is due, and
// returns how many handler runs it made. It is meant for tests and one-shot
// jobs, on a worker that was not started, and returns when it is done.
//
// Handlers run concurrently, not one after another: each round claims up to
// Concurrency due receipts and runs all their handlers at once, each in its
// own transaction (MessagesPerTx does not apply), then waits for every one
// before the next round. Which handler runs first, within a round or across
// rounds, is not guaranteed; a test that needs one handler at a time sets
// Concurrency to 1. A receipt that fails and is due again before the drain
// ends (a zero Backoff) runs again and counts again.
func (w *Worker) Drain(ctx context.Context) (int, error) {
	if err := w.life.CheckIdle(); err != nil {
		return 0, err
	}
	defer w.startHeartbeat()()
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		leases, _, err := w.claim(ctx, w.cfg.Concurrency, false)
		if err != nil {
			return total, err
		}
		if len(leases) == 0 {
			return total, nil
		}
		runs := make([]*run, len(leases))
		for i, l := range leases {
			r := w.newRun([]*lease{l})
			runs[i] = r
			go func() {
				if !r.execute() {
					w.abandonedSlots.Add(-1)
				}
			}()
		}
		for _, r := range runs {
			<-r.over // returned, or abandoned by the hung-handler watchdog
		}
		total += len(leases)
	}
}
