package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/driver"
	"github.com/pginbox/pginbox/internal/service"
	"github.com/pginbox/pginbox/schema"
)

// errRelayStopping is the cause of a Publisher context cancelled by Stop.
var errRelayStopping = errors.New("pginbox: relay stopping")

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
	// drv is the layout's outbox driver, probed at the first claim;
	// claims is its claimer, made then.
	drv    driver.Lazy
	claims driver.RelayClaimer

	wake chan struct{} // new events may be due

	base service.Base // what the listener and maintenance log with
	life service.Lifecycle
	run  *relayRun
}

// relayRun is what one Start created and Stop tears down.
type relayRun struct {
	loops *service.Loops // batch loop, maintenance, listener
	// stopPublish cancels the Publisher's context of the batch in flight.
	stopPublish context.CancelCauseFunc
}

// testHooks stop a relay at a crash point in the crash tests.
type testHooks struct {
	// afterPublish runs once a batch was published, before it is marked.
	afterPublish func(published []ID)
	// listening runs once the listener subscribed and woke the batch loop.
	listening func()
	// listed runs after a read of the scopes with due events (Citus).
	listed func(scopes int)
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
	return &Relay{
		pool: pool, pub: pub, cfg: cfg, log: cfg.Logger, drv: driver.Lazy{Log: cfg.Logger},
		wake: make(chan struct{}, 1),
		base: service.Base{Name: "relay", Log: cfg.Logger},
		life: service.Lifecycle{Name: "relay"},
	}, nil
}

// Start checks the schema version and starts publishing in the background.
// ctx bounds the start-up check only; call Stop to stop.
func (r *Relay) Start(ctx context.Context) error {
	return r.life.Start(func() error {
		if err := schema.Check(ctx, r.pool); err != nil {
			return err
		}
		if restricted, err := r.restricted(ctx); err != nil {
			return err
		} else if restricted {
			return errRelayRestricted
		}
		var listeners []*service.Listener
		if !r.cfg.PollOnly {
			var err error
			if listeners, err = r.listeners(); err != nil {
				return dbError("listening on the Citus nodes", err)
			}
		}
		pubCtx, stopPublish := context.WithCancelCause(context.Background())
		run := &relayRun{loops: service.NewLoops(), stopPublish: stopPublish}
		r.run = run
		run.loops.Go(func(ctx context.Context) { r.batchLoop(ctx, pubCtx) })
		run.loops.Go(r.maintenance().Run)
		for _, l := range listeners {
			run.loops.Go(l.Run)
		}
		r.log.Info("pginbox relay started", "batch_size", r.cfg.BatchSize, "lease", r.cfg.Lease, "poll_only", r.cfg.PollOnly)
		return nil
	})
}

// Stop stops claiming, lets a batch being published finish within
// ShutdownGrace, then cancels its Publisher's context: what the Publisher
// did not confirm is released (without spending an attempt) and published
// again later. When ctx ends first, the publish is cancelled at once, and if
// the Publisher still does not return, Stop returns ctx's error.
func (r *Relay) Stop(ctx context.Context) error {
	return r.life.Stop(ctx, func() (bool, error) { return r.stop(ctx) })
}

// stop is the first Stop's work. It reports false when the Publisher is
// still running: a later Stop then waits on its ctx.
func (r *Relay) stop(ctx context.Context) (bool, error) {
	run := r.run
	run.loops.Stop()
	done := run.loops.Done()
	grace := time.NewTimer(r.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		r.log.Warn("pginbox relay: shutdown grace elapsed, cancelling the publish in flight", "grace", r.cfg.ShutdownGrace)
		run.stopPublish(errRelayStopping)
	case <-ctx.Done():
		run.stopPublish(errRelayStopping)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return false, fmt.Errorf("pginbox: relay stop: the publisher did not return after its context was cancelled; its batch returns to PENDING when the lease expires: %w", ctx.Err())
	}
	run.stopPublish(errRelayStopping)
	r.log.Info("pginbox relay stopped")
	return true, nil
}

// Run starts the relay, blocks until ctx is done, then stops it gracefully.
func (r *Relay) Run(ctx context.Context) error {
	return service.Run(ctx, r, 2*r.cfg.ShutdownGrace)
}

// Drain publishes due events synchronously until none is due, and returns how
// many it marked PUBLISHED. Events whose publish failed wait for their retry
// and are not due again within the call. It is meant for tests and one-shot
// jobs, on a relay that was not started.
func (r *Relay) Drain(ctx context.Context) (int, error) {
	if err := r.life.CheckIdle(); err != nil {
		return 0, err
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
