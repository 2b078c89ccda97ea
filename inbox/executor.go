package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/internal/driver"
	"github.com/pginbox/pginbox/internal/errtext"
	"github.com/pginbox/pginbox/internal/service"
)

// HungHandlerGrace is how long past its deadline (WorkerConfig.HandlerTimeout)
// a handler may take to return before the worker abandons it: the receipt's
// attempt is recorded as failed ("handler hung"), the other receipts of its
// transaction are released, and the slot stays out of use until the handler
// returns. By then the database has ended the handler's transaction (its
// statement and idle timeouts are HandlerTimeout plus one second).
const HungHandlerGrace = 5 * time.Second

// slot is one handler slot: it runs queued receipts, up to MessagesPerTx of
// one scope per transaction, until the queue is closed and empty.
func (w *Worker) slot() {
	for {
		batch := w.queue.take(w.cfg.MessagesPerTx)
		if batch == nil {
			return
		}
		w.running.Add(int64(len(batch)))
		service.Signal(w.slotFreed) // the queue shrank
		r := w.newRun(batch)
		r.slotted = true
		if r.execute() {
			w.running.Add(-int64(len(batch)))
		} else {
			w.abandonedSlots.Add(-1)
			w.log.Warn("pginbox worker: an abandoned handler returned; its slot is back in use")
		}
		service.Signal(w.slotFreed)
	}
}

// job is a claimed receipt ready for its handler.
type job struct {
	l    *lease
	fn   handler.Func
	msg  *handler.Msg
	log  *slog.Logger
	base context.Context // cancelled on shutdown or lease loss
	stop context.CancelCauseFunc
	ctx  context.Context // base with the handler deadline, once started
	err  error           // why the attempt failed; nil once completed
	done bool            // settled: nothing more to record
	// lost: another worker owns the receipt; uncertain: the commit's outcome
	// is unknown; ran: how long the handler ran (zero if it did not).
	lost, uncertain bool
	ran             time.Duration
	// orderingKey is the receipt's ordering key ("" for none), from
	// ReceiptStart: commit promotes the key's next receipt.
	orderingKey string
}

// run is the receipts one slot took together, through every transaction they
// need. A watchdog abandons it when a handler hangs.
type run struct {
	w       *Worker
	jobs    []*job
	n       int  // leases the run took
	slotted bool // a handler slot runs it (counted in Worker.running)
	// state is runIdle, runInHandler or runAbandoned.
	state   atomic.Int32
	current atomic.Pointer[job] // the job whose handler runs now
	pid     atomic.Uint32       // the server process of its open transaction
	mu      sync.Mutex          // serializes settling with abandoning
	// over is closed when every receipt of the run reached an outcome here:
	// when the run returns, or when it is abandoned.
	over     chan struct{}
	overOnce sync.Once
}

func (r *run) end() { r.overOnce.Do(func() { close(r.over) }) }

const (
	runIdle int32 = iota
	runInHandler
	runAbandoned
)

// newRun prepares the receipts a slot (or Drain) took to run together.
func (w *Worker) newRun(ls []*lease) *run {
	r := &run{w: w, n: len(ls), over: make(chan struct{})}
	for _, l := range ls {
		if j := w.prepare(l); j != nil {
			r.jobs = append(r.jobs, j)
		}
	}
	return r
}

// execute runs the receipts to their outcomes and reports false when the run
// was abandoned (its slot stays out of use until then).
func (r *run) execute() bool {
	w := r.w
	defer r.end()
	defer func() {
		for _, j := range r.jobs {
			j.stop(nil)
		}
	}()
	if len(r.jobs) == 0 {
		return true
	}
	w.active.add(r)
	defer w.active.remove(r)
	// A transaction carries one scope: receipts of different scopes that a slot
	// took together run in one transaction per scope.
	for _, jobs := range byScope(r.jobs) {
		if r.state.Load() == runAbandoned {
			break
		}
		if len(jobs) == 1 {
			w.runIsolated(r, jobs)
		} else {
			w.runBatch(r, jobs)
		}
	}
	return r.state.Load() != runAbandoned
}

// prepare readies a claimed receipt for its handler. It returns nil when the
// receipt already reached an outcome here (released at shutdown, or DEAD because
// nothing can handle it).
func (w *Worker) prepare(l *lease) *job {
	r := l.r
	log := w.log.With("receipt_id", r.ID, "consumer", r.Identity.Consumer, "event_type", r.EventType, "attempt", r.Attempt)
	if w.life.Stopping() {
		w.release(r, log)
		w.leases.drop(l)
		return nil
	}
	key := handler.Key{Consumer: r.Identity.Consumer, EventType: r.EventType, SchemaVersion: r.SchemaVersion}
	fn, ok := w.reg.Lookup(key)
	if !ok {
		w.fail(r, handler.Permanent(fmt.Errorf("no handler for %s: register one and requeue the receipt", key)), log, nil)
		w.leases.drop(l)
		return nil
	}
	for i := len(w.cfg.HandlerMiddleware) - 1; i >= 0; i-- {
		fn = w.cfg.HandlerMiddleware[i](fn)
	}
	base, stop := context.WithCancelCause(w.handlerCtx)
	// A lease lost while the receipt waited cancels its handler.
	stopAfter := context.AfterFunc(l.ctx, func() { stop(context.Cause(l.ctx)) })
	return &job{
		l: l, fn: fn, log: log, base: base, ctx: base,
		stop: func(cause error) { stopAfter(); stop(cause) },
		msg: &handler.Msg{
			ReceiptID:     r.ID,
			Scope:         r.Identity.Scope,
			Source:        r.Identity.Source,
			Consumer:      r.Identity.Consumer,
			MessageID:     r.Identity.MessageID,
			EventType:     r.EventType,
			SchemaVersion: r.SchemaVersion,
			Attempt:       r.Attempt,
			MaxAttempts:   r.MaxAttempts,
		},
	}
}

// runIsolated runs each job in a transaction of its own.
func (w *Worker) runIsolated(r *run, jobs []*job) {
	for _, j := range jobs {
		if r.state.Load() == runAbandoned {
			return
		}
		res := w.transact(r, []*job{j})
		switch {
		case res.startErr != nil:
			j.err = res.startErr
		case res.commitErr != nil:
			j.err = res.commitErr
		}
		r.settle(j) // completed, lost, or failed with j.err
	}
}

// txResult is how one handler transaction ended.
type txResult struct {
	startErr  error  // BEGIN or ReceiptStart failed: no handler ran
	lost      []*job // receipts another worker owns now: their handlers did not run
	failed    *job   // its handler failed (its err is set); everything rolled back
	commitErr error  // the server refused COMMIT: nothing committed
}

// transact runs the jobs' handlers in one transaction that first completes
// their receipts (ReceiptStart), and commits it when every handler succeeded.
// Without an error in the result, the jobs that were not lost committed (or
// their commit outcome is unknown, which lease recovery resolves).
func (w *Worker) transact(r *run, jobs []*job) (res txResult) {
	// Waiting for a connection and the start are bounded like a handler, and
	// end with shutdown.
	sctx, cancel := context.WithTimeout(jobs[0].base, w.cfg.HandlerTimeout)
	defer cancel()
	pc, err := w.on(w.pool, jobs[0].l.r).Acquire(sctx)
	if err != nil {
		return txResult{startErr: fmt.Errorf("starting the handler transaction: %w", err)}
	}
	tx := newConnTx(pc)
	// Rollback after Commit is a no-op.
	defer tx.Rollback(context.Background())
	defer r.pid.Store(0)

	ids := make([]string, len(jobs))
	tokens := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i], tokens[i] = j.l.r.ID.UUIDString(), j.l.r.Token.UUIDString()
	}
	// BEGIN, the timeouts and the scope (the receipts share one: execute groups
	// them) ride in the same round trip as the start.
	var pid uint32
	open := w.drv.Known().Opening(tx.conn, jobs[0].l.r.Identity.Scope, driver.Open{
		TimeoutMs: w.txLimitMs, PID: &pid, DiscardPlans: w.plans.due(pc.Conn().PgConn()),
	})
	rows, err := db.New(open).ReceiptStart(sctx, db.ReceiptStartParams{
		Ids: ids, Tokens: tokens, ScopeID: jobs[0].l.r.Identity.Scope.ID,
	})
	if err != nil {
		return txResult{startErr: fmt.Errorf("completing the receipt and loading its payload: %w", err)}
	}
	// By ID and token: a receipt this worker claimed again after its lease
	// ran out can be here under both claims, and only the current one
	// completed.
	type claim struct{ id, token ID }
	started := make(map[claim]db.ReceiptStartRow, len(rows))
	for _, row := range rows {
		started[claim{row.ID, row.ClaimToken}] = row
	}
	if len(rows) > 0 {
		r.pid.Store(pid)
		w.plans.add(len(rows))
	}
	running := make([]*job, 0, len(rows))
	for _, j := range jobs {
		row, ok := started[claim{j.l.r.ID, j.l.r.Token}]
		if !ok {
			j.log.Warn("pginbox worker: lease lost before the handler started; another worker owns the receipt")
			j.lost = true
			res.lost = append(res.lost, j)
			continue
		}
		if err := j.load(row); err != nil {
			j.err = err
			res.failed = j
			return res
		}
		running = append(running, j)
	}

	htx := &handlerTx{Tx: tx}
	for _, j := range running {
		if err := r.callHandler(j, htx); err != nil {
			j.err = err
			res.failed = j
			return res
		}
	}
	if len(running) == 0 {
		return res
	}
	if err := w.commit(tx, running); err != nil {
		res.commitErr = err
	}
	return res
}

// commit commits a handler transaction. It returns an error only when the
// server refused the COMMIT, so nothing committed. A commit whose outcome is
// unknown (the connection failed) returns nil: if it did not commit, the
// receipts stay PROCESSING until their leases expire and recovery retries them.
func (w *Worker) commit(tx *connTx, jobs []*job) error {
	if w.hooks.beforeCommit != nil {
		for _, j := range jobs {
			w.hooks.beforeCommit(j.l.r.ID)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), bookkeepingTimeout)
	defer cancel()
	var err error
	b := promotion(ctx, w.drv.Known(), jobs)
	if b != nil {
		err = tx.commitAfter(ctx, b) // an error before COMMIT: nothing committed
	} else {
		err = tx.Commit(ctx)
	}
	switch {
	case err == nil:
		if b != nil {
			w.woke(-1)
			service.Signal(w.wake) // a key's next receipt may be due now
		}
		if w.hooks.afterCommit != nil {
			for _, j := range jobs {
				w.hooks.afterCommit(j.l.r.ID)
			}
		}
		return nil
	case certainlyNotCommitted(ctx, err):
		return fmt.Errorf("committing: %w", err)
	}
	for _, j := range jobs {
		j.log.Error("pginbox worker: commit outcome unknown; lease recovery will retry if it did not commit", "error", err)
		j.uncertain = true
	}
	return nil
}

// load gives the handler its payload and metadata from ReceiptStart.
func (j *job) load(row db.ReceiptStartRow) error {
	if row.OrderingKey != nil {
		j.orderingKey = *row.OrderingKey
	}
	if row.Payload == nil {
		return handler.Permanent(errors.New("payload was purged: nothing to handle"))
	}
	j.msg.Payload = json.RawMessage(*row.Payload)
	j.msg.Metadata = nil
	if row.Metadata != "" && row.Metadata != "{}" {
		if err := json.Unmarshal([]byte(row.Metadata), &j.msg.Metadata); err != nil {
			return handler.Permanent(fmt.Errorf("decoding metadata: %w", err))
		}
	}
	return nil
}

// callHandler runs j's handler on tx with its deadline and the hung-handler
// watchdog, and returns why the attempt failed, or nil.
func (r *run) callHandler(j *job, tx *handlerTx) error {
	w := r.w
	var cancel context.CancelFunc
	j.ctx, cancel = context.WithTimeoutCause(j.base, w.cfg.HandlerTimeout, ErrHandlerTimeout)
	defer cancel()
	r.current.Store(j)
	if !r.state.CompareAndSwap(runIdle, runInHandler) {
		return ErrWorkerShutdown // abandoned before it started
	}
	watchdog := time.AfterFunc(w.cfg.HandlerTimeout+HungHandlerGrace, func() { r.abandon(j, errHandlerHung(w.cfg.HandlerTimeout)) })
	j.msg.Tx = tx
	start := time.Now()
	err := invoke(handler.ContextWithMsg(j.ctx, j.msg), j.fn, j.msg)
	j.ran = time.Since(start)
	watchdog.Stop()
	if !r.state.CompareAndSwap(runInHandler, runIdle) {
		return ErrWorkerShutdown // abandoned meanwhile: the run's receipts were settled for it
	}
	switch {
	case tx.ended.Load():
		return handler.Permanent(fmt.Errorf("%w (handler error: %v)", handler.ErrTxOwnedByWorker, err))
	case err != nil:
		return err
	case j.ctx.Err() != nil:
		return context.Cause(j.ctx) // returned, but too late to commit
	}
	switch tx.Conn().PgConn().TxStatus() {
	case 'E':
		return errors.New("the handler returned nil after a statement in its transaction failed: return that statement's error instead")
	case 'I':
		return handler.Permanent(errors.New("the handler ended its transaction with SQL (COMMIT or ROLLBACK): the worker owns the transaction"))
	}
	return nil
}

func errHandlerHung(timeout time.Duration) error {
	return fmt.Errorf("handler hung: it did not return within %s after its deadline (HandlerTimeout %s); make it honour its context", HungHandlerGrace, timeout)
}

// abandon gives up on a run whose handler (hung, or still running when Stop
// gave up) does not return: the hung job's attempt is recorded as failed with
// cause, the run's other unsettled receipts are released, and the slot is
// counted as lost until the handler returns.
func (r *run) abandon(hung *job, cause error) {
	if !r.state.CompareAndSwap(runInHandler, runAbandoned) {
		return
	}
	w := r.w
	defer r.end()
	w.abandonedSlots.Add(1)
	if r.slotted {
		w.running.Add(-int64(r.n))
	}
	hung.log.Error("pginbox worker: abandoning a handler that does not return; its slot stays out of use until it does",
		"error", cause, "slots_abandoned", w.abandonedSlots.Load(), "concurrency", w.cfg.Concurrency)
	// Its transaction holds the run's receipts: end it, so recording their
	// outcomes does not wait for the session's idle timeout.
	if pid := r.pid.Load(); pid != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), bookkeepingTimeout)
		if _, err := db.New(w.on(w.pool, hung.l.r)).BackendTerminate(ctx, int32(pid)); err != nil {
			hung.log.Warn("pginbox worker: ending the abandoned handler's session failed; its receipts wait for the session's idle timeout", "error", err)
		}
		cancel()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.jobs {
		if j.done {
			continue
		}
		j.done = true
		if j == hung {
			e := receiptEvent(EventAbandoned, j.l.r)
			e.Err = cause
			w.events.publish(e)
			w.fail(j.l.r, cause, j.log, j)
		} else {
			w.release(j.l.r, j.log)
		}
		w.leases.drop(j.l)
	}
	if int(w.abandonedSlots.Load()) >= w.cfg.Concurrency {
		w.log.Error("pginbox worker: every handler slot is abandoned; releasing queued receipts and claiming nothing until a handler returns")
		w.releaseQueued()
	}
	service.Signal(w.slotFreed)
}

// settle records j's outcome once its transaction ended: a failed attempt, a
// release, or nothing (completed, or lost to another worker).
func (r *run) settle(j *job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j.done || r.state.Load() == runAbandoned {
		return
	}
	j.done = true
	w := r.w
	defer w.leases.drop(j.l)
	if j.err == nil {
		switch {
		case j.lost:
			w.events.publish(receiptEvent(EventLeaseLost, j.l.r))
		case !j.uncertain:
			e := receiptEvent(EventCompleted, j.l.r)
			e.Duration, e.Metadata = j.ran, j.msg.Metadata
			w.events.publish(e)
		}
		return
	}
	switch cause := context.Cause(j.ctx); {
	case errors.Is(cause, ErrLeaseLost):
		j.log.Warn("pginbox worker: lease lost, handler writes rolled back", "error", j.err)
	case errors.Is(cause, ErrWorkerShutdown):
		j.log.Info("pginbox worker: handler interrupted by shutdown, releasing the receipt")
		w.release(j.l.r, j.log)
	default:
		herr := j.err
		if errors.Is(cause, ErrHandlerTimeout) && !errors.Is(herr, ErrHandlerTimeout) {
			// Past the deadline the handler's error is usually its symptom (a
			// statement timeout, a cancelled query): record the cause with it.
			herr = fmt.Errorf("%w: %w", ErrHandlerTimeout, herr)
		}
		w.fail(j.l.r, herr, j.log, j)
	}
}

// invoke calls the handler, turning a panic into an error.
func invoke(ctx context.Context, fn handler.Func, msg *handler.Msg) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(ctx, msg)
}

// fail records a failed attempt, fenced by the claim token. ran is the job
// whose handler ran, or nil.
func (w *Worker) fail(r claimed, cause error, log *slog.Logger, ran *job) {
	dead := handler.IsPermanent(cause)
	var delay time.Duration
	if !dead {
		delay = w.cfg.Backoff(r.Attempt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bookkeepingTimeout)
	defer cancel()
	// The failure is the receipt's scope's business: it runs where the handler did.
	row, err := db.New(w.drv.Known().Scoped(w.on(w.pool, r), r.Identity.Scope)).ReceiptFail(ctx, db.ReceiptFailParams{
		Dead: dead, DelayMs: delay.Milliseconds(), LastError: errtext.Storable(cause),
		ID: r.ID, ClaimToken: r.Token, ScopeID: r.Identity.Scope.ID,
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		log.Warn("pginbox worker: lease lost before the failure was recorded", "error", cause)
		w.events.publish(receiptEvent(EventLeaseLost, r))
		return
	case err != nil:
		log.Error("pginbox worker: recording a failure failed; lease recovery will retry", "error", err, "handler_error", cause)
		return
	case row.Status == string(StatusDead):
		log.Error("pginbox worker: receipt is DEAD", "error", cause)
	default:
		log.Warn("pginbox worker: handler failed, will retry", "error", cause, "available_at", row.AvailableAt)
	}
	if w.events.active() {
		e := receiptEvent(EventFailed, r)
		if row.Status == string(StatusDead) {
			e.Kind = EventDead
		} else {
			e.RetryAt = row.AvailableAt
		}
		e.Err = cause
		if ran != nil {
			e.Duration, e.Metadata = ran.ran, ran.msg.Metadata
		}
		w.events.publish(e)
	}
}

// release hands a claim back without spending its attempt.
func (w *Worker) release(r claimed, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), bookkeepingTimeout)
	defer cancel()
	n, err := db.New(w.on(w.sys, r)).ReceiptRelease(ctx, db.ReceiptReleaseParams{ID: r.ID, ClaimToken: r.Token, ScopeID: r.Identity.Scope.ID})
	switch {
	case err != nil:
		log.Error("pginbox worker: releasing a claim failed; it stays claimed until its lease expires", "error", err)
	case n == 1:
		w.events.publish(receiptEvent(EventReleased, r))
	}
}

// handBack releases a lease that never reached a handler and forgets it.
func (w *Worker) handBack(l *lease) {
	w.release(l.r, w.log.With("receipt_id", l.r.ID))
	w.leases.drop(l)
}

// releaseQueued hands back every receipt waiting in the queue.
func (w *Worker) releaseQueued() {
	for _, l := range w.queue.takeAll() {
		w.handBack(l)
	}
}

// activeRuns is the set of runs in progress, for Stop to abandon the ones
// whose handlers do not return.
type activeRuns struct {
	mu   sync.Mutex
	runs map[*run]struct{}
}

func (a *activeRuns) add(r *run) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs == nil {
		a.runs = map[*run]struct{}{}
	}
	a.runs[r] = struct{}{}
}

func (a *activeRuns) remove(r *run) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.runs, r)
}

// abandonAll abandons every run whose handler is still running.
func (a *activeRuns) abandonAll(cause error) {
	a.mu.Lock()
	runs := make([]*run, 0, len(a.runs))
	for r := range a.runs {
		runs = append(runs, r)
	}
	a.mu.Unlock()
	for _, r := range runs {
		if j := r.current.Load(); j != nil {
			r.abandon(j, cause) // a no-op unless that handler is running
		}
	}
}
