package inbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/driver"
)

// ChangeParams are what every audited admin change needs.
type ChangeParams struct {
	// ExpectedVersion is the receipt version the decision was based on
	// (Receipt.Version). If the receipt changed since, the change is refused
	// with a *VersionConflictError.
	ExpectedVersion int64
	// Actor is who asks, recorded in the audit trail: a user name, a service
	// account. Required.
	Actor string
	// Reason is why, recorded in the audit trail. Required.
	Reason string
}

func (p ChangeParams) validate() error {
	if p.ExpectedVersion < 1 {
		return &ValidationError{Field: "expected_version", Rule: RuleRequired, Detail: "set it to the receipt's current version (Receipt.Version), which is at least 1"}
	}
	if err := validateString("actor", p.Actor); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(p.Reason) == "":
		return &ValidationError{Field: "reason", Rule: RuleRequired, Detail: "say why, for the audit trail"}
	case len(p.Reason) > MaxReasonBytes:
		return &ValidationError{Field: "reason", Rule: RuleTooLong, Detail: fmt.Sprintf("%d bytes: at most %d allowed", len(p.Reason), MaxReasonBytes)}
	case !utf8.ValidString(p.Reason):
		return &ValidationError{Field: "reason", Rule: RuleInvalidUTF8, Detail: "must be valid UTF-8"}
	case strings.IndexByte(p.Reason, 0) >= 0:
		return &ValidationError{Field: "reason", Rule: RuleNullCharacter, Detail: "PostgreSQL text cannot store U+0000"}
	}
	return nil
}

// RequeueResult is the outcome of a committed requeue.
type RequeueResult struct {
	ID          ID     // the receipt requeued
	FromStatus  Status // its status before: DEAD, RETRYABLE, or PROCESSING with an expired lease
	FromVersion int64  // its version before
	// Version is the receipt's new version.
	Version int64
	// AuditID is the pginbox_audit row recording the requeue.
	AuditID int64
}

// ReplayResult is the outcome of a committed replay.
type ReplayResult struct {
	OriginalID ID // the COMPLETED receipt replayed
	// OriginalVersion is the original's new version.
	OriginalVersion int64
	// NewID is the new PENDING receipt, linked to the original by ReplayOf.
	NewID ID
	// AuditID is the pginbox_audit row recording the replay.
	AuditID int64
}

var (
	requeueFrom = []Status{StatusDead, StatusRetryable}
	replayFrom  = []Status{StatusCompleted}
)

// Requeue moves a DEAD or RETRYABLE receipt back to PENDING with a fresh retry
// budget (attempts 0), due now, and wakes listening workers. A PROCESSING
// receipt whose lease expired and that no handler is running (its worker is
// gone or hung) may be requeued too; its old worker is fenced out. The receipt must
// still be at p.ExpectedVersion. It writes an audit row in the same
// transaction.
//
// Errors: ErrNotFound (also for another scope's receipt), *VersionConflictError,
// *WrongStateError, *ValidationError. None of them changed anything.
func (v *AdminView) Requeue(ctx context.Context, id ID, p ChangeParams) (*RequeueResult, error) {
	var res *RequeueResult
	err := v.inTx(ctx, "requeue", func(tx pgx.Tx) (err error) {
		res, err = v.RequeueTx(ctx, tx, id, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	v.admin.log.Info("pginbox admin: requeued receipt", "receipt_id", id, "view", v.String(),
		"actor", p.Actor, "reason", p.Reason, "from_status", res.FromStatus, "version", res.Version)
	return res, nil
}

// RequeueTx is Requeue inside the caller's transaction: the requeue, its audit
// row and the wake-up commit or roll back with it. The receipt stays locked
// until then. A refusal (not found, conflict, wrong state) leaves tx usable.
func (v *AdminView) RequeueTx(ctx context.Context, tx pgx.Tx, id ID, p ChangeParams) (*RequeueResult, error) {
	q, cur, err := v.startChange(ctx, tx, id, "requeue", p, requeueFrom)
	if err != nil {
		return nil, err
	}
	row, err := q.ReceiptRequeue(ctx, db.ReceiptRequeueParams{ID: id, ExpectedVersion: p.ExpectedVersion, ScopeID: cur.ScopeID})
	if err != nil {
		// lock holds the work row and the receipt and checked both, and
		// claims skip locked work rows: no claim can overtake us here.
		return nil, dbError("requeue", err)
	}
	// Wakes listening workers at commit, like accept's.
	if err := q.ReceiptNotify(ctx, []string{row.Consumer}); err != nil {
		return nil, dbError("requeue: waking the workers", err)
	}
	audit, err := q.AuditInsert(ctx, db.AuditInsertParams{
		ReceiptID:   id,
		ScopeKind:   cur.ScopeKind,
		ScopeID:     cur.ScopeID,
		Action:      AuditRequeue,
		Actor:       p.Actor,
		Reason:      p.Reason,
		FromStatus:  cur.Status,
		ToStatus:    string(StatusPending),
		FromVersion: cur.Version,
		ToVersion:   row.Version,
	})
	if err != nil {
		return nil, dbError("requeue: audit", err)
	}
	return &RequeueResult{ID: id, FromStatus: Status(cur.Status), FromVersion: cur.Version, Version: row.Version, AuditID: audit.ID}, nil
}

// Replay creates a NEW PENDING receipt from a COMPLETED one, with the same
// identity, payload and fingerprint and ReplayOf set to it, and wakes listening
// workers. It deliberately allows another business execution of the same
// event. The original keeps its status and payload; only its version moves, so
// of several concurrent replays with the same expected version exactly one
// succeeds. It writes an audit row in the same transaction.
//
// Errors: ErrNotFound (also for another scope's receipt), *VersionConflictError,
// *WrongStateError, *PayloadPurgedError (retention dropped the payload),
// *ValidationError. None of them changed anything.
func (v *AdminView) Replay(ctx context.Context, id ID, p ChangeParams) (*ReplayResult, error) {
	var res *ReplayResult
	err := v.inTx(ctx, "replay", func(tx pgx.Tx) (err error) {
		res, err = v.ReplayTx(ctx, tx, id, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	v.admin.log.Info("pginbox admin: replayed receipt", "receipt_id", id, "view", v.String(),
		"actor", p.Actor, "reason", p.Reason, "new_receipt_id", res.NewID)
	return res, nil
}

// ReplayTx is Replay inside the caller's transaction: the new receipt, the
// original's version bump, the audit row and the wake-up commit or roll back
// with it. The original stays locked until then. A refusal leaves tx usable.
func (v *AdminView) ReplayTx(ctx context.Context, tx pgx.Tx, id ID, p ChangeParams) (*ReplayResult, error) {
	q, cur, err := v.startChange(ctx, tx, id, "replay", p, replayFrom)
	if err != nil {
		return nil, err
	}
	if cur.Purged {
		e := &PayloadPurgedError{ReceiptID: id}
		if cur.PayloadPurgedAt != nil {
			e.PurgedAt = *cur.PayloadPurgedAt
		}
		return nil, e
	}
	version, err := q.ReceiptVersionBump(ctx, db.ReceiptVersionBumpParams{ID: id, ExpectedVersion: p.ExpectedVersion, ScopeID: cur.ScopeID})
	if err != nil {
		return nil, dbError("replay", err)
	}
	newID := inboxtype.New()
	keyed := cur.OrderingKey != nil
	if keyed {
		// The copy goes to the back of its key's queue: its number and its
		// BLOCKED or PENDING state are decided under the key's lock.
		s := Scope{Kind: ScopeKind(cur.ScopeKind), ID: cur.ScopeID}
		lock := driver.KeyLockName(cur.Consumer, s, *cur.OrderingKey)
		if err := q.ReceiptKeyLock(ctx, db.ReceiptKeyLockParams{Keys: []string{lock}, ScopeID: cur.ScopeID}); err != nil {
			return nil, dbError("replay: locking the ordering key", err)
		}
	}
	n, err := q.ReceiptReplay(ctx, db.ReceiptReplayParams{NewID: newID, OriginalID: id, ScopeID: cur.ScopeID})
	if err == nil && n == 1 && keyed {
		n, err = q.ReceiptQueueKeyed(ctx, db.ReceiptQueueKeyedParams{ID: newID, ScopeID: cur.ScopeID})
	} else if err == nil && n == 1 {
		n, err = q.ReceiptReplayQueue(ctx, db.ReceiptReplayQueueParams{ID: newID, ScopeID: cur.ScopeID})
	}
	if err == nil && n != 1 {
		// lock holds the original and checked its status and payload.
		err = fmt.Errorf("pginbox: internal: replay inserted %d rows, want 1", n)
	}
	if err != nil {
		return nil, dbError("replay: creating the new receipt", err)
	}
	// Wakes listening workers at commit, like accept's.
	if err := q.ReceiptNotify(ctx, []string{cur.Consumer}); err != nil {
		return nil, dbError("replay: waking the workers", err)
	}
	audit, err := q.AuditInsert(ctx, db.AuditInsertParams{
		ReceiptID:    id,
		ScopeKind:    cur.ScopeKind,
		ScopeID:      cur.ScopeID,
		Action:       AuditReplay,
		Actor:        p.Actor,
		Reason:       p.Reason,
		FromStatus:   cur.Status,
		ToStatus:     cur.Status, // the original stays COMPLETED
		FromVersion:  cur.Version,
		ToVersion:    version,
		NewReceiptID: newID,
	})
	if err != nil {
		return nil, dbError("replay: audit", err)
	}
	return &ReplayResult{OriginalID: id, OriginalVersion: version, NewID: newID, AuditID: audit.ID}, nil
}

// startChange begins an operator's change of receipt id in the caller's tx:
// it checks the view and p, enters tx's scope and locks the receipt (lock).
func (v *AdminView) startChange(ctx context.Context, tx pgx.Tx, id ID, action string, p ChangeParams, allowed []Status) (*db.Queries, db.ReceiptGetForUpdateRow, error) {
	var none db.ReceiptGetForUpdateRow
	if v.err != nil {
		return nil, none, v.err
	}
	if err := p.validate(); err != nil {
		return nil, none, err
	}
	if err := v.enterCaller(ctx, tx); err != nil {
		return nil, none, err
	}
	q := db.New(tx)
	cur, err := v.lock(ctx, q, id, action, p.ExpectedVersion, allowed)
	return q, cur, err
}

// lock locks the receipt's work row (the row a claim takes) and the receipt,
// and checks the expected version, then the status. The lock serializes admin
// changes: a second one waits, then sees the first one's version and fails the
// check instead of repeating the change. A claim that took the work row first
// is waited for and fails the check the same way; a later one skips the row
// until the change commits. A PROCESSING
// receipt is never waited for: a requeue may take it once its lease expired
// and no handler's transaction holds it (the worker is gone); otherwise it is
// refused at once.
func (v *AdminView) lock(ctx context.Context, q *db.Queries, id ID, action string, expected int64, allowed []Status) (db.ReceiptGetForUpdateRow, error) {
	all, kind, sid := v.scopeArgs()
	st, err := q.ReceiptState(ctx, db.ReceiptStateParams{ID: id, AllScopes: all, ScopeKind: kind, ScopeID: sid})
	if errors.Is(err, pgx.ErrNoRows) {
		return db.ReceiptGetForUpdateRow{}, v.notFound(id)
	}
	if err != nil {
		return db.ReceiptGetForUpdateRow{}, dbError(action, err)
	}
	// The receipt's scope never changes: lock it with the one-scope form,
	// which on Citus runs on the scope's node (the all-scopes form would lock
	// across shards, which Citus refuses).
	all, kind, sid = false, st.ScopeKind, st.ScopeID
	takesExpired := action == "requeue"
	var cur db.ReceiptGetForUpdateRow
	if Status(st.Status) == StatusProcessing {
		wrong := &WrongStateError{ReceiptID: id, Action: action, Found: StatusProcessing, Allowed: allowed}
		if !takesExpired || !st.LeaseExpired {
			if st.LeaseExpiresAt != nil {
				wrong.Detail = fmt.Sprintf("a worker holds it until its lease expires at %s; if that worker is gone, requeue it after that",
					st.LeaseExpiresAt.UTC().Format(time.RFC3339))
			}
			return cur, wrong
		}
		var row db.ReceiptGetForUpdateNoWaitRow
		row, err = q.ReceiptGetForUpdateNoWait(ctx, db.ReceiptGetForUpdateNoWaitParams{ID: id, AllScopes: all, ScopeKind: kind, ScopeID: sid})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
			wrong.Detail = "a handler's transaction is running it right now (its lease is not extended while it runs): wait for its outcome"
			return cur, wrong
		}
		cur = db.ReceiptGetForUpdateRow(row)
	} else {
		cur, err = q.ReceiptGetForUpdate(ctx, db.ReceiptGetForUpdateParams{ID: id, AllScopes: all, ScopeKind: kind, ScopeID: sid})
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return cur, v.notFound(id)
	}
	if err != nil {
		return cur, dbError(action, err)
	}
	if cur.Version != expected {
		return cur, &VersionConflictError{ReceiptID: id, Action: action, Expected: expected, Current: cur.Version}
	}
	expiredClaim := takesExpired && Status(cur.Status) == StatusProcessing && cur.LeaseExpired
	if !slices.Contains(allowed, Status(cur.Status)) && !expiredClaim {
		wrong := &WrongStateError{ReceiptID: id, Action: action, Found: liveStatus(cur.Status), Allowed: allowed}
		if cur.Status == statusBlocked {
			wrong.Detail = "it waits behind an earlier receipt of its ordering key: act on that one (requeue or skip it if it is DEAD)"
		}
		return cur, wrong
	}
	return cur, nil
}

// inTx runs fn in a transaction of its own and commits it.
func (v *AdminView) inTx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	if v.err != nil {
		return v.err
	}
	// RequeueTx and ReplayTx apply the view's scope to it.
	tx, err := v.pool().Begin(ctx)
	if err != nil {
		return dbError(op+": begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		if isServerError(err) {
			return dbError(op+": commit", err)
		}
		return fmt.Errorf("pginbox: %s: commit outcome unknown (connection lost): look at the receipt before retrying: %w", op, err)
	}
	return nil
}
