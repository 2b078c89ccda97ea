package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/recentscopes"
	"github.com/pginbox/pginbox/schema"
)

var (
	errRelayStarted = errors.New("pginbox: relay already started")
	errRelayNotIdle = errors.New("pginbox: relay is running: Drain is for a relay that was not started")
	// errRelayStopping is the cause of a Publisher context cancelled by Stop.
	errRelayStopping = errors.New("pginbox: relay stopping")
)

// Relay publishes the outbox's events: it claims due events in batches,
// publishes them through its Publisher, and marks them PUBLISHED, or records
// the failure for a retry. Any number of relays may run on one database;
// they never publish one event at the same time. Create it with NewRelay, run
// it with Start and Stop (or Run), or publish what is due synchronously with
// Drain.
//
// The work is split by concern: the batch loop (relay_batch.go) claims,
// publishes and settles, maintenance (relay_maintain.go) recovers expired
// leases and deletes published history, and the listener (relay_listen.go)
// wakes the batch loop.
type Relay struct {
	pool  *pgxpool.Pool
	pub   Publisher
	cfg   RelayConfig
	log   *slog.Logger
	hooks testHooks
	// layout says whether the outbox is distributed by Citus (claims,
	// settling, recovery and purge then run per scope).
	layout layout
	recent recentscopes.List // scopes with due events seen by the claim's discovery (Citus)

	wake chan struct{} // new events may be due

	mu      sync.Mutex
	started bool
	run     *relayRun
}

// relayRun is what one Start created and Stop tears down.
type relayRun struct {
	stopLoops context.CancelFunc
	// stopPublish cancels the Publisher's context of the batch in flight.
	stopPublish context.CancelCauseFunc
	batchLoop   sync.WaitGroup
	otherLoops  sync.WaitGroup // maintenance, listener
	stopping    bool
	stopped     chan struct{}
}

// testHooks stop a relay at a crash point in the crash tests.
type testHooks struct {
	// afterPublish runs once a batch was published, before it is marked.
	afterPublish func(published []ID)
	// listening runs once the listener subscribed and woke the batch loop.
	listening func()
}

// NewRelay returns a relay publishing through pub. It fails with an
// *inbox.ConfigError when cfg is invalid or the pool is too small: a relay
// holds up to three connections (claims and marks, maintenance, and LISTEN
// unless PollOnly).
//
// A relay publishes every scope's events, so with row-level security enabled
// (schema.EnableTenancy) its pool's role needs BYPASSRLS (the system role of
// schema.GrantStatements): on a restricted role it would claim nothing, so
// Start and Drain refuse one (inbox.ErrTenancyRestricted), and a running
// relay logs an error when row-level security starts to restrict it.
func NewRelay(pool *pgxpool.Pool, pub Publisher, cfg RelayConfig) (*Relay, error) {
	if pool == nil {
		return nil, errors.New("pginbox: NewRelay: pool is nil: pass the *pgxpool.Pool of the database the events are emitted in")
	}
	if pub == nil {
		return nil, errors.New("pginbox: NewRelay: publisher is nil: pass an outbox.Publisher, e.g. outbox.InboxPublisher{Client: ...}")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := cfg.checkPool(int(pool.Config().MaxConns)); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Relay{pool: pool, pub: pub, cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1)}, nil
}

// Start checks the schema version and starts publishing in the background.
// ctx bounds the start-up check only; call Stop to stop.
func (r *Relay) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errRelayStarted
	}
	if err := schema.Check(ctx, r.pool); err != nil {
		return err
	}
	if restricted, err := r.restricted(ctx); err != nil {
		return err
	} else if restricted {
		return errRelayRestricted
	}
	r.started = true
	loopCtx, stopLoops := context.WithCancel(context.Background())
	pubCtx, stopPublish := context.WithCancelCause(context.Background())
	run := &relayRun{stopLoops: stopLoops, stopPublish: stopPublish, stopped: make(chan struct{})}
	r.run = run
	run.batchLoop.Add(1)
	go r.batchLoop(loopCtx, pubCtx, &run.batchLoop)
	run.otherLoops.Add(1)
	go r.maintainLoop(loopCtx, &run.otherLoops)
	if !r.cfg.PollOnly {
		run.otherLoops.Add(1)
		go r.listenLoop(loopCtx, &run.otherLoops)
	}
	r.log.Info("pginbox relay started", "batch_size", r.cfg.BatchSize, "lease", r.cfg.Lease, "poll_only", r.cfg.PollOnly)
	return nil
}

// Stop stops claiming, lets a batch being published finish within
// ShutdownGrace, then cancels its Publisher's context: what the Publisher
// did not confirm is released (without spending an attempt) and published
// again later. When ctx ends first, the publish is cancelled at once, and if
// the Publisher still does not return, Stop returns ctx's error.
func (r *Relay) Stop(ctx context.Context) error {
	r.mu.Lock()
	if !r.started {
		r.mu.Unlock()
		return nil
	}
	run := r.run
	if run.stopping {
		r.mu.Unlock()
		select {
		case <-run.stopped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	run.stopping = true
	r.mu.Unlock()

	run.stopLoops()
	batchDone := make(chan struct{})
	go func() {
		run.batchLoop.Wait()
		run.otherLoops.Wait()
		close(batchDone)
	}()
	grace := time.NewTimer(r.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-batchDone:
	case <-grace.C:
		r.log.Warn("pginbox relay: shutdown grace elapsed, cancelling the publish in flight", "grace", r.cfg.ShutdownGrace)
		run.stopPublish(errRelayStopping)
	case <-ctx.Done():
		run.stopPublish(errRelayStopping)
	}
	select {
	case <-batchDone:
	case <-ctx.Done():
		return fmt.Errorf("pginbox: relay stop: the publisher did not return after its context was cancelled; its batch returns to PENDING when the lease expires: %w", ctx.Err())
	}
	run.stopPublish(errRelayStopping)
	close(run.stopped)
	r.log.Info("pginbox relay stopped")
	return nil
}

// Run starts the relay, blocks until ctx is done, then stops it gracefully.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 2*r.cfg.ShutdownGrace)
	defer cancel()
	return r.Stop(stopCtx)
}

// Drain publishes due events synchronously until none is due, and returns how
// many it marked PUBLISHED. Events whose publish failed wait for their retry
// and are not due again within the call. It is meant for tests and one-shot
// jobs, on a relay that was not started.
func (r *Relay) Drain(ctx context.Context) (int, error) {
	r.mu.Lock()
	started := r.started
	r.mu.Unlock()
	if started {
		return 0, errRelayNotIdle
	}
	if restricted, err := r.restricted(ctx); err != nil {
		return 0, err
	} else if restricted {
		return 0, errRelayRestricted
	}
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		res, err := r.batch(ctx, ctx)
		total += res.published
		if err != nil {
			return total, err
		}
		if res.claimed == 0 {
			return total, nil
		}
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
