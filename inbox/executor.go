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
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/handler"
)

// maxLastErrorLength bounds the error text stored with a failed receipt.
const maxLastErrorLength = 4000

// slot is one handler slot: it runs queued receipts, up to MessagesPerTx per
// transaction, until the queue is closed.
func (w *Worker) slot(wg *sync.WaitGroup) {
	defer wg.Done()
	for l := range w.queue.ch {
		batch := []*lease{l}
	fill:
		for len(batch) < w.cfg.MessagesPerTx {
			select {
			case next, ok := <-w.queue.ch:
				if !ok {
					break fill
				}
				batch = append(batch, next)
			default:
				break fill
			}
		}
		w.running.Add(int64(len(batch)))
		signal(w.slotFreed) // the queue shrank
		if len(batch) == 1 {
			w.process(l)
		} else {
			w.processBatch(batch)
		}
		w.running.Add(-int64(len(batch)))
		signal(w.slotFreed)
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
	r := l.r
	log := w.log.With("receipt_id", r.ID, "consumer", r.Identity.Consumer, "event_type", r.EventType, "attempt", r.Attempt)
	if w.stopping.Load() {
		w.release(r, log)
		return nil
	}
	key := handler.Key{Consumer: r.Identity.Consumer, EventType: r.EventType, SchemaVersion: r.SchemaVersion}
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
		Scope:         r.Identity.Scope,
		Source:        r.Identity.Source,
		Consumer:      r.Identity.Consumer,
		MessageID:     r.Identity.MessageID,
		EventType:     r.EventType,
		SchemaVersion: r.SchemaVersion,
		Attempt:       r.Attempt,
		MaxAttempts:   r.MaxAttempts,
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
	r := j.l.r
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
	defer w.leases.drop(l)
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
	tx, err := w.pool.BeginTx(j.ctx, pgx.TxOptions{BeginQuery: w.beginQuery()})
	if err != nil {
		return fmt.Errorf("starting the handler transaction: %w", err)
	}
	// Rollback after Commit is a no-op; it must not use the handler's context.
	defer tx.Rollback(context.WithoutCancel(j.ctx))

	completed, err := w.handleAndComplete(tx, j)
	if err != nil || !completed {
		return err
	}
	if w.hooks.beforeCommit != nil {
		w.hooks.beforeCommit(j.l.r.ID)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(j.ctx), bookkeepingTimeout)
	defer cancel()
	if err := tx.Commit(fctx); err != nil {
		return w.commitFailed(fctx, j, err)
	}
	return nil
}

// beginQuery starts a handler transaction whose own timeouts end it, even if a
// handler ignores its context, shortly after its deadline.
func (w *Worker) beginQuery() string {
	ms := w.cfg.HandlerTimeout.Milliseconds() + 1000
	return fmt.Sprintf("BEGIN; SET LOCAL statement_timeout = %d; SET LOCAL idle_in_transaction_session_timeout = %d", ms, ms)
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
	fctx, cancel := context.WithTimeout(context.WithoutCancel(j.ctx), bookkeepingTimeout)
	defer cancel()
	n, err := db.New(tx).ReceiptComplete(fctx, db.ReceiptCompleteParams{ID: j.l.r.ID, ClaimToken: j.l.r.Token})
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
func (w *Worker) commitFailed(ctx context.Context, j *job, err error) error {
	if certainlyNotCommitted(ctx, err) {
		return fmt.Errorf("committing: %w", err)
	}
	j.log.Error("pginbox worker: commit outcome unknown; lease recovery will retry if it did not commit", "error", err)
	return nil
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
func (w *Worker) fail(r claimed, cause error, log *slog.Logger) {
	dead := handler.IsPermanent(cause)
	var delay time.Duration
	if !dead {
		delay = w.cfg.Backoff(r.Attempt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bookkeepingTimeout)
	defer cancel()
	row, err := db.New(w.pool).ReceiptFail(ctx, db.ReceiptFailParams{
		Dead: dead, DelayMs: delay.Milliseconds(), LastError: errorText(cause),
		ID: r.ID, ClaimToken: r.Token,
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
func (w *Worker) release(r claimed, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), bookkeepingTimeout)
	defer cancel()
	if _, err := db.New(w.pool).ReceiptRelease(ctx, db.ReceiptReleaseParams{ID: r.ID, ClaimToken: r.Token}); err != nil {
		log.Error("pginbox worker: releasing a claim failed; it stays claimed until its lease expires", "error", err)
	}
}

// handBack releases a lease that never reached a handler and forgets it.
func (w *Worker) handBack(l *lease) {
	w.release(l.r, w.log.With("receipt_id", l.r.ID))
	w.leases.drop(l)
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
