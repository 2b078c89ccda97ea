package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/schema"
)

// Causes of a handler's context cancellation, also recorded as the error.
var (
	ErrLeaseLost      = errors.New("pginbox: lease lost: another worker recovered or re-claimed the receipt")
	ErrHandlerTimeout = errors.New("pginbox: handler deadline exceeded")
	ErrWorkerShutdown = errors.New("pginbox: worker shutting down")
	errWorkerNotIdle  = errors.New("pginbox: worker is running: Drain is for a worker that was not started")
	errWorkerStarted  = errors.New("pginbox: worker already started")
	errBatchBroken    = errors.New("pginbox: another message of the batch broke its transaction")
)

// Test hooks for crash tests (set only by tests, through export_test.go).
var (
	testHookAfterClaim   func(claimed int)
	testHookBeforeCommit func(id inboxtype.ID)
)

// asyncCommit runs bookkeeping transactions (claims) without waiting for their
// WAL flush. Losing one in a server crash only returns the receipt to its due
// state, and the handler's durable commit flushes the claim before it anyway, so
// a message's outcome never depends on it. It saves one disk flush per claim.
var asyncCommit = pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit = off"}

// maxLastErrorLength bounds the error text stored with a failed receipt.
const maxLastErrorLength = 4000

// Worker claims due receipts of the consumers it owns and runs their handlers,
// one transaction per message. Create it with NewWorker, run it with Start and
// Stop (or Run), or process what is due synchronously with Drain.
type Worker struct {
	pool       *pgxpool.Pool
	q          *db.Queries
	reg        *handler.Registry
	cfg        WorkerConfig
	owned      []string
	ownedSet   map[string]bool
	log        *slog.Logger
	beginQuery string

	// handlerCtx is the parent of every handler context; cancelling it
	// interrupts running handlers (hard shutdown).
	handlerCtx    context.Context
	cancelHandler context.CancelCauseFunc

	mu            sync.Mutex
	started       bool
	stopLoops     context.CancelFunc
	stopHeartbeat context.CancelFunc
	stopping      atomic.Bool
	loops         sync.WaitGroup
	heartbeats    sync.WaitGroup
	inflight      sync.WaitGroup
	wake          chan struct{}
	slotFreed     chan struct{}
	stoppedDone   chan struct{}

	// Claimed receipts wait in ready for a handler. held counts claimed
	// receipts not yet finished, running those in a handler; leases are what
	// the heartbeat extends.
	ready    chan *lease
	held     atomic.Int64
	running  atomic.Int64
	leasesMu sync.Mutex
	leases   map[inboxtype.ID]*lease
}

// lease is a claimed receipt this worker holds until it reaches an outcome.
type lease struct {
	row db.ReceiptClaimRow
	// ctx is cancelled with ErrLeaseLost when a heartbeat finds the claim gone.
	ctx  context.Context
	lose context.CancelCauseFunc
}

// NewWorker returns a worker dispatching to reg. It fails when an owned consumer
// has no handler or the pool is too small for the configured concurrency.
func NewWorker(pool *pgxpool.Pool, reg *handler.Registry, cfg WorkerConfig) (*Worker, error) {
	if pool == nil || reg == nil {
		return nil, errors.New("pginbox: NewWorker: pool and registry are required")
	}
	cfg = cfg.withDefaults()
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
	if max := int(pool.Config().MaxConns); max < cfg.Concurrency+2 {
		return nil, fmt.Errorf("pginbox: NewWorker: pool MaxConns %d is below Concurrency %d + 2 (listener, claims and heartbeats): raise pool_max_conns or lower Concurrency", max, cfg.Concurrency)
	}
	hctx, cancel := context.WithCancelCause(context.Background())
	return &Worker{
		pool:          pool,
		q:             db.New(pool),
		reg:           reg,
		cfg:           cfg,
		owned:         append([]string(nil), owned...),
		ownedSet:      ownedSet,
		log:           cfg.Logger,
		beginQuery:    beginQuery(cfg.HandlerTimeout, 1),
		handlerCtx:    hctx,
		cancelHandler: cancel,
		wake:          make(chan struct{}, 1),
		slotFreed:     make(chan struct{}, 1),
		leases:        map[inboxtype.ID]*lease{},
	}, nil
}

// beginQuery starts a handler transaction whose own timeouts end it, even if a
// handler ignores its context, shortly after the deadline of its last message.
func beginQuery(timeout time.Duration, messages int) string {
	ms := timeout.Milliseconds()*int64(messages) + 1000
	return fmt.Sprintf("BEGIN; SET LOCAL statement_timeout = %d; SET LOCAL idle_in_transaction_session_timeout = %d", ms, ms)
}

func (w *Worker) beginQueryFor(messages int) string {
	if messages == 1 {
		return w.beginQuery
	}
	return beginQuery(w.cfg.HandlerTimeout, messages)
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
	w.stopLoops = cancel
	w.stopHeartbeat = w.startHeartbeat()
	w.stoppedDone = make(chan struct{})
	// Up to ClaimBatch receipts wait beyond the running ones, so one claim feeds
	// many handlers; their leases are extended while they wait.
	w.ready = make(chan *lease, w.cfg.Concurrency*w.cfg.MessagesPerTx+w.cfg.ClaimBatch)
	for range w.cfg.Concurrency {
		w.inflight.Add(1)
		go w.handlerLoop()
	}
	w.loops.Add(2)
	go w.claimLoop(loopCtx)
	go w.recoverLoop(loopCtx)
	if !w.cfg.PollOnly {
		w.loops.Add(1)
		go w.listenLoop(loopCtx)
	}
	w.log.Info("pginbox worker started", "consumers", w.owned, "concurrency", w.cfg.Concurrency, "poll_only", w.cfg.PollOnly)
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
	if w.stopping.Swap(true) {
		w.mu.Unlock()
		select {
		case <-w.stoppedDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.mu.Unlock()

	w.stopLoops()
	w.loops.Wait()
	close(w.ready) // handler loops release what is still queued, then exit
	done := make(chan struct{})
	go func() {
		w.inflight.Wait()
		w.stopHeartbeat()
		close(done)
		close(w.stoppedDone) // also for a later Stop when this one gave up early
	}()
	grace := time.NewTimer(w.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		w.log.Warn("pginbox worker: shutdown grace elapsed, cancelling running handlers", "grace", w.cfg.ShutdownGrace)
		w.cancelHandler(ErrWorkerShutdown)
	case <-ctx.Done():
		w.cancelHandler(ErrWorkerShutdown)
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
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.process(l)
			}()
		}
		wg.Wait()
		total += len(leases)
	}
}

func (w *Worker) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (w *Worker) claimLoop(ctx context.Context) {
	defer w.loops.Done()
	poll := time.NewTimer(0)
	defer poll.Stop()
	capacity := w.cfg.Concurrency*w.cfg.MessagesPerTx + w.cfg.ClaimBatch
	for {
		held := int(w.held.Load())
		free := capacity - held
		queued := held - int(w.running.Load())
		claimed, full := false, false
		// Top the queue up once half of it is taken, so handlers never wait
		// for a claim and claims stay batched.
		if free > 0 && queued <= w.cfg.ClaimBatch/2 {
			n := min(free, w.cfg.ClaimBatch)
			leases, err := w.claim(ctx, n)
			if err != nil && ctx.Err() == nil {
				w.log.Error("pginbox worker: claim failed", "error", err)
			}
			for _, l := range leases {
				w.ready <- l // never blocks: capacity bounds what is held
			}
			claimed = true
			full = err == nil && len(leases) == n
		}
		if full && ctx.Err() == nil {
			continue // probably more due work
		}
		// A freed slot matters only when the worker held back; after a claim
		// that came up short, only a notification or the poll brings work.
		var slotFreed chan struct{}
		if !claimed {
			slotFreed = w.slotFreed
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-slotFreed:
		case <-poll.C:
			poll.Reset(w.cfg.PollInterval)
		}
	}
}

// handlerLoop runs queued receipts until the queue is closed.
func (w *Worker) handlerLoop() {
	defer w.inflight.Done()
	for l := range w.ready {
		batch := []*lease{l}
	fill:
		for len(batch) < w.cfg.MessagesPerTx {
			select {
			case next, ok := <-w.ready:
				if !ok {
					break fill
				}
				batch = append(batch, next)
			default:
				break fill
			}
		}
		w.running.Add(int64(len(batch)))
		w.signal(w.slotFreed) // the queue shrank
		if len(batch) == 1 {
			w.process(l)
		} else {
			w.processBatch(batch)
		}
		w.running.Add(-int64(len(batch)))
		w.signal(w.slotFreed)
	}
}

// claim is never interrupted by ctx once sent: a claim that committed unseen would
// leave receipts PROCESSING until their leases expire.
func (w *Worker) claim(ctx context.Context, n int) ([]*lease, error) {
	if ctx.Err() != nil {
		return nil, nil
	}
	// Waiting for a connection may end with ctx; nothing was sent yet.
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, dbError("claim", err)
	}
	defer conn.Release()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var rows []db.ReceiptClaimRow
	err = pgx.BeginTxFunc(cctx, conn, asyncCommit, func(tx pgx.Tx) error {
		var err error
		rows, err = db.New(tx).ReceiptClaim(cctx, db.ReceiptClaimParams{
			LeaseMs:   w.cfg.Lease.Milliseconds(),
			Consumers: w.owned,
			MaxCount:  int32(n),
		})
		return err
	})
	if err != nil {
		return nil, dbError("claim", err)
	}
	leases := make([]*lease, len(rows))
	w.leasesMu.Lock()
	for i, r := range rows {
		ctx, lose := context.WithCancelCause(context.Background())
		leases[i] = &lease{row: r, ctx: ctx, lose: lose}
		w.leases[r.ID] = leases[i]
	}
	w.leasesMu.Unlock()
	w.held.Add(int64(len(rows)))
	if testHookAfterClaim != nil && len(rows) > 0 {
		testHookAfterClaim(len(rows))
	}
	return leases, nil
}

// done forgets a lease once its receipt reached an outcome (or was handed back).
func (w *Worker) done(l *lease) {
	w.leasesMu.Lock()
	// The same receipt may have been recovered and claimed again meanwhile:
	// forget only this lease, never its successor.
	if w.leases[l.row.ID] == l {
		delete(w.leases, l.row.ID)
	}
	w.leasesMu.Unlock()
	w.held.Add(-1)
	l.lose(nil)
}

// startHeartbeat extends every held lease each HeartbeatInterval, in one
// statement, and cancels the leases found lost. It returns a function that stops
// it and waits.
func (w *Worker) startHeartbeat() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	w.heartbeats.Add(1)
	go func() {
		defer w.heartbeats.Done()
		t := time.NewTicker(w.cfg.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := w.extendLeases(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("pginbox worker: heartbeat failed, will retry", "error", err)
			}
		}
	}()
	return func() { cancel(); w.heartbeats.Wait() }
}

func (w *Worker) extendLeases(ctx context.Context) error {
	w.leasesMu.Lock()
	if len(w.leases) == 0 {
		w.leasesMu.Unlock()
		return nil
	}
	held := make(map[inboxtype.ID]*lease, len(w.leases))
	ids := make([]string, 0, len(w.leases))
	tokens := make([]string, 0, len(w.leases))
	for id, l := range w.leases {
		held[id] = l
		ids = append(ids, id.UUIDString())
		tokens = append(tokens, l.row.ClaimToken.UUIDString())
	}
	w.leasesMu.Unlock()
	// A heartbeat stuck on a dead connection must not outlive its interval.
	ctx, cancel := context.WithTimeout(ctx, w.cfg.HeartbeatInterval)
	defer cancel()
	lost, err := w.q.ReceiptHeartbeat(ctx, db.ReceiptHeartbeatParams{
		Ids: ids, Tokens: tokens, LeaseMs: w.cfg.Lease.Milliseconds(),
	})
	if err != nil {
		return dbError("heartbeat", err)
	}
	for _, id := range lost {
		if l := held[id]; l != nil {
			l.lose(ErrLeaseLost)
		}
	}
	return nil
}

func (w *Worker) recoverLoop(ctx context.Context) {
	defer w.loops.Done()
	t := time.NewTicker(w.cfg.RecoverInterval)
	defer t.Stop()
	for {
		if _, err := w.RecoverExpired(ctx); err != nil && ctx.Err() == nil {
			w.log.Error("pginbox worker: lease recovery failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RecoverExpired returns receipts of the owned consumers whose lease expired to
// RETRYABLE (or DEAD when their attempts are spent) and reports how many. Every
// running worker does this periodically; no leader is needed.
func (w *Worker) RecoverExpired(ctx context.Context) (int, error) {
	const batch = 100
	total := 0
	for {
		rows, err := w.q.ReceiptRecover(ctx, db.ReceiptRecoverParams{Consumers: w.owned, MaxCount: batch})
		if err != nil {
			return total, dbError("recover", err)
		}
		for _, r := range rows {
			w.log.Warn("pginbox worker: recovered an expired lease", "receipt_id", r.ID, "consumer", r.Consumer, "status", r.Status)
		}
		total += len(rows)
		if len(rows) > 0 {
			w.signal(w.wake)
		}
		if len(rows) < batch {
			return total, nil
		}
	}
}

func (w *Worker) listenLoop(ctx context.Context) {
	defer w.loops.Done()
	for ctx.Err() == nil {
		err := w.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("pginbox worker: LISTEN connection lost, polling until it is back", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.cfg.PollInterval):
		}
	}
}

func (w *Worker) listen(ctx context.Context) error {
	pc, err := w.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A listening session must not go back to the pool.
	conn := pc.Hijack()
	defer conn.Close(context.Background())
	if err := db.New(conn).ReceiptListen(ctx); err != nil {
		return err
	}
	w.signal(w.wake) // notifications sent while not listening were missed
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if w.ownedSet[n.Payload] {
			w.signal(w.wake)
		}
	}
}

// job is a claimed receipt ready for its handler.
type job struct {
	l      *lease
	fn     handler.Func
	msg    *handler.Msg
	log    *slog.Logger
	ctx    context.Context // the handler's context
	cancel func()
	err    error // why the attempt failed; nil once completed
}

// prepare readies a claimed receipt for its handler. It returns nil when the
// receipt already reached an outcome here (released at shutdown, or DEAD because
// nothing can handle it).
func (w *Worker) prepare(l *lease) *job {
	r := l.row
	log := w.log.With("receipt_id", r.ID, "consumer", r.Consumer, "event_type", r.EventType, "attempt", r.Attempts)
	if w.stopping.Load() {
		w.release(r, log)
		return nil
	}
	key := handler.Key{Consumer: r.Consumer, EventType: r.EventType, SchemaVersion: int(r.SchemaVersion)}
	fn, ok := w.reg.Lookup(key)
	if !ok {
		w.fail(r, handler.Permanent(fmt.Errorf("no handler for %s: register one and requeue the receipt", key)), log)
		return nil
	}
	if r.Payload == nil {
		w.fail(r, handler.Permanent(errors.New("payload was purged: nothing to handle")), log)
		return nil
	}
	msg := &handler.Msg{
		ReceiptID:     r.ID,
		Scope:         inboxtype.Scope{Kind: inboxtype.ScopeKind(r.ScopeKind), ID: r.ScopeID},
		Source:        r.Source,
		Consumer:      r.Consumer,
		MessageID:     r.MessageID,
		EventType:     r.EventType,
		SchemaVersion: int(r.SchemaVersion),
		Attempt:       int(r.Attempts),
		MaxAttempts:   int(r.MaxAttempts),
		Payload:       json.RawMessage(*r.Payload),
	}
	if r.Metadata != "" {
		if err := json.Unmarshal([]byte(r.Metadata), &msg.Metadata); err != nil {
			w.fail(r, handler.Permanent(fmt.Errorf("decoding metadata: %w", err)), log)
			return nil
		}
	}
	hctx, cancel := context.WithCancelCause(w.handlerCtx)
	// A lease lost while the receipt waited or runs cancels the handler.
	stopAfter := context.AfterFunc(l.ctx, func() { cancel(context.Cause(l.ctx)) })
	return &job{l: l, fn: fn, msg: msg, log: log, ctx: hctx, cancel: func() {
		stopAfter()
		cancel(nil)
	}}
}

// startClock starts the handler's deadline; in a batch, each message's clock
// starts when its own handler does.
func (j *job) startClock(timeout time.Duration) {
	ctx, cancel := context.WithTimeoutCause(j.ctx, timeout, ErrHandlerTimeout)
	prev := j.cancel
	j.ctx, j.cancel = ctx, func() { cancel(); prev() }
}

// settle records a failed attempt after its transaction rolled back.
func (w *Worker) settle(j *job) {
	if j.err == nil {
		return
	}
	r := j.l.row
	switch cause := context.Cause(j.ctx); {
	case errors.Is(cause, ErrLeaseLost):
		j.log.Warn("pginbox worker: lease lost, handler writes rolled back", "error", j.err)
	case errors.Is(cause, ErrWorkerShutdown):
		j.log.Info("pginbox worker: handler interrupted by shutdown, releasing the receipt")
		w.release(r, j.log)
	default:
		herr := j.err
		if errors.Is(cause, ErrHandlerTimeout) && !errors.Is(herr, ErrHandlerTimeout) {
			// Past the deadline the handler's error is usually its symptom (a
			// statement timeout, a cancelled query): record the cause with it.
			herr = fmt.Errorf("%w: %w", ErrHandlerTimeout, herr)
		}
		w.fail(r, herr, j.log)
	}
}

// process runs one claimed receipt to an outcome in its own transaction.
func (w *Worker) process(l *lease) {
	defer w.done(l)
	j := w.prepare(l)
	if j == nil {
		return
	}
	defer func() { j.cancel() }() // startClock replaces it
	j.err = w.runHandler(j)
	w.settle(j)
}

// runHandler runs the handler and the completion in one transaction. It returns
// nil when that transaction committed (or its commit outcome is unknown, or the
// lease was lost), otherwise the error to record after the rollback.
func (w *Worker) runHandler(j *job) error {
	j.startClock(w.cfg.HandlerTimeout)
	tx, err := w.pool.BeginTx(j.ctx, pgx.TxOptions{BeginQuery: w.beginQuery})
	if err != nil {
		return fmt.Errorf("starting the handler transaction: %w", err)
	}
	// Rollback after Commit is a no-op; it must not use the handler's context.
	defer tx.Rollback(context.WithoutCancel(j.ctx))

	completed, err := w.handleAndComplete(tx, j)
	if err != nil || !completed {
		return err
	}
	if testHookBeforeCommit != nil {
		testHookBeforeCommit(j.l.row.ID)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(j.ctx), 30*time.Second)
	defer cancel()
	if err := tx.Commit(fctx); err != nil {
		return w.commitFailed(j, err)
	}
	return nil
}

// handleAndComplete runs the handler on tx, then the token-fenced completion.
// completed is false when the lease turned out lost (nothing to record).
func (w *Worker) handleAndComplete(tx pgx.Tx, j *job) (completed bool, err error) {
	j.msg.Tx = tx
	herr := callHandler(j.ctx, j.fn, j.msg)
	if herr == nil && j.ctx.Err() != nil {
		herr = context.Cause(j.ctx) // returned, but too late to commit
	}
	if herr != nil {
		return false, herr
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(j.ctx), 30*time.Second)
	defer cancel()
	n, err := db.New(tx).ReceiptComplete(fctx, db.ReceiptCompleteParams{ID: j.l.row.ID, ClaimToken: j.l.row.ClaimToken})
	if err != nil {
		return false, fmt.Errorf("completing the receipt: %w", err)
	}
	if n == 0 {
		j.log.Warn("pginbox worker: lease lost before commit, handler writes rolled back")
		return false, nil // someone else owns the receipt now: record nothing
	}
	return true, nil
}

// commitFailed turns a failed COMMIT into the error to record: a server error
// rolled back, so the attempt failed; any other failure has an unknown outcome,
// and if it did not commit, the lease expires and recovery retries it.
func (w *Worker) commitFailed(j *job, err error) error {
	if j.ctx.Err() == nil && isServerError(err) {
		return fmt.Errorf("committing: %w", err)
	}
	j.log.Error("pginbox worker: commit outcome unknown; lease recovery will retry if it did not commit", "error", err)
	return nil
}

// processBatch runs several claimed receipts in one transaction, each handler
// in its own savepoint: a failure rolls back only that message, and one commit
// (one disk flush) completes the rest.
func (w *Worker) processBatch(ls []*lease) {
	jobs := make([]*job, 0, len(ls))
	for _, l := range ls {
		defer w.done(l)
		if j := w.prepare(l); j != nil {
			defer func() { j.cancel() }() // startClock replaces it
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return
	}
	ctx := context.WithoutCancel(jobs[0].ctx)
	tx, err := w.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: w.beginQueryFor(len(jobs))})
	if err != nil {
		for _, j := range jobs {
			j.err = fmt.Errorf("starting the handler transaction: %w", err)
			w.settle(j)
		}
		return
	}
	defer tx.Rollback(ctx)

	var completed []*job
	for _, j := range jobs {
		// pgx closes a connection whose query's context ends mid-statement, so a
		// message that timed out or lost its lease can take the transaction down.
		if tx.Conn().IsClosed() {
			j.err = errBatchBroken
			continue
		}
		j.startClock(w.cfg.HandlerTimeout)
		sp, err := tx.Begin(j.ctx) // SAVEPOINT
		if err != nil {
			j.err = fmt.Errorf("starting the message's savepoint: %w", err)
			continue
		}
		ok, err := w.handleAndComplete(sp, j)
		j.err = err
		if !ok {
			if rerr := sp.Rollback(ctx); rerr != nil && j.err == nil {
				j.err = fmt.Errorf("rolling back the message's savepoint: %w", rerr)
			}
			continue
		}
		if err := sp.Commit(ctx); err != nil { // RELEASE SAVEPOINT
			j.err = fmt.Errorf("releasing the message's savepoint: %w", err)
			continue
		}
		completed = append(completed, j)
	}
	if len(completed) > 0 && tx.Conn().IsClosed() {
		for _, j := range completed {
			j.err = errBatchBroken // COMMIT was never sent: certainly not committed
		}
		completed = nil
	}
	if len(completed) > 0 {
		if testHookBeforeCommit != nil {
			for _, j := range completed {
				testHookBeforeCommit(j.l.row.ID)
			}
		}
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := tx.Commit(fctx)
		cancel()
		if err != nil {
			for _, j := range completed {
				j.err = w.commitFailed(j, err)
			}
		}
	}
	for _, j := range jobs {
		if errors.Is(j.err, errBatchBroken) {
			// Not this message's failure: hand it back without spending its attempt.
			j.log.Warn("pginbox worker: another message broke the batch's transaction, releasing this one")
			w.release(j.l.row, j.log)
			continue
		}
		w.settle(j)
	}
}

func callHandler(ctx context.Context, fn handler.Func, msg *handler.Msg) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(ctx, msg)
}

// fail records a failed attempt, fenced by the claim token.
func (w *Worker) fail(r db.ReceiptClaimRow, cause error, log *slog.Logger) {
	dead := handler.IsPermanent(cause)
	var delay time.Duration
	if !dead {
		delay = w.cfg.Backoff(int(r.Attempts))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	row, err := w.q.ReceiptFail(ctx, db.ReceiptFailParams{
		Dead: dead, DelayMs: delay.Milliseconds(), LastError: errorText(cause),
		ID: r.ID, ClaimToken: r.ClaimToken,
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		log.Warn("pginbox worker: lease lost before the failure was recorded", "error", cause)
	case err != nil:
		log.Error("pginbox worker: recording a failure failed; lease recovery will retry", "error", err, "handler_error", cause)
	case row.Status == string(StatusDead):
		log.Error("pginbox worker: receipt is DEAD", "error", cause)
	default:
		log.Warn("pginbox worker: handler failed, will retry", "error", cause, "available_at", row.AvailableAt)
	}
}

// release hands a claim back without spending its attempt.
func (w *Worker) release(r db.ReceiptClaimRow, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := w.q.ReceiptRelease(ctx, db.ReceiptReleaseParams{ID: r.ID, ClaimToken: r.ClaimToken}); err != nil {
		log.Error("pginbox worker: releasing a claim failed; it stays claimed until its lease expires", "error", err)
	}
}

// errorText makes an error storable in a text column: valid UTF-8, no NUL,
// bounded length.
func errorText(err error) string {
	s := strings.ToValidUTF8(err.Error(), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", `\x00`)
	if len(s) > maxLastErrorLength {
		s = strings.ToValidUTF8(s[:maxLastErrorLength], "") + "…"
	}
	return s
}
