package inbox

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/internal/driver"
)

// SkipResult is the outcome of a committed skip.
type SkipResult struct {
	ID          ID    // the DEAD receipt skipped
	FromVersion int64 // its version before
	// Version is the receipt's new version.
	Version int64
	// OrderingKey is the key the receipt no longer holds up.
	OrderingKey string
	// Promoted reports whether the key's next receipt became due.
	Promoted bool
	// AuditID is the pginbox_audit row recording the skip.
	AuditID int64
}

var skipFrom = []Status{StatusDead}

// Skip takes a DEAD receipt with an ordering key out of its key's order, so
// the next receipt of the key runs (a DEAD receipt at the head of its key
// holds the key's later receipts back until it is requeued or skipped). The
// skipped receipt stays DEAD; a later requeue runs it without order. The
// receipt must still be at p.ExpectedVersion. It writes an audit row
// (action "skip") in the same transaction.
//
// Errors: ErrNotFound (also for another scope's receipt), *VersionConflictError,
// *WrongStateError (not DEAD, or without an ordering key, or skipped already),
// *ValidationError. None of them changed anything.
func (v *AdminView) Skip(ctx context.Context, id ID, p ChangeParams) (*SkipResult, error) {
	var res *SkipResult
	err := v.inTx(ctx, "skip", func(tx pgx.Tx) (err error) {
		res, err = v.SkipTx(ctx, tx, id, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	v.admin.log.Info("pginbox admin: skipped receipt", "receipt_id", id, "view", v.String(),
		"actor", p.Actor, "reason", p.Reason, "ordering_key", res.OrderingKey, "version", res.Version)
	return res, nil
}

// SkipTx is Skip inside the caller's transaction: the skip, the promotion of
// the key's next receipt, its audit row and the wake-up commit or roll back
// with it. A refusal (not found, conflict, wrong state) leaves tx usable.
func (v *AdminView) SkipTx(ctx context.Context, tx pgx.Tx, id ID, p ChangeParams) (*SkipResult, error) {
	q, cur, err := v.startChange(ctx, tx, id, "skip", p, skipFrom)
	if err != nil {
		return nil, err
	}
	if cur.OrderingKey == nil {
		return nil, &WrongStateError{ReceiptID: id, Action: "skip", Found: Status(cur.Status), Allowed: skipFrom,
			Detail: "it has no ordering key, so it holds nothing back: requeue it instead"}
	}
	row, err := q.ReceiptSkip(ctx, db.ReceiptSkipParams{ID: id, ExpectedVersion: p.ExpectedVersion, ScopeID: cur.ScopeID})
	if errors.Is(err, pgx.ErrNoRows) {
		// lock checked the version and the state: the key is gone already.
		return nil, &WrongStateError{ReceiptID: id, Action: "skip", Found: Status(cur.Status), Allowed: skipFrom,
			Detail: "it was skipped already: it holds its key's later receipts back no longer"}
	}
	if err != nil {
		return nil, dbError("skip", err)
	}
	s := Scope{Kind: ScopeKind(cur.ScopeKind), ID: cur.ScopeID}
	drv, err := v.admin.drv.Get(ctx, tx)
	if err != nil {
		return nil, dbError("skip", err)
	}
	woken, err := promoteKeys(ctx, drv, tx, s, []string{row.Consumer}, []string{row.OrderingKey},
		[]string{driver.KeyLockName(row.Consumer, s, row.OrderingKey)})
	if err != nil {
		return nil, dbError("skip", err)
	}
	if len(woken) > 0 {
		if err := q.ReceiptNotify(ctx, woken); err != nil {
			return nil, dbError("skip: waking the workers", err)
		}
	}
	audit, err := q.AuditInsert(ctx, db.AuditInsertParams{
		ReceiptID:   id,
		ScopeKind:   cur.ScopeKind,
		ScopeID:     cur.ScopeID,
		Action:      AuditSkip,
		Actor:       p.Actor,
		Reason:      p.Reason,
		FromStatus:  cur.Status,
		ToStatus:    cur.Status, // it stays DEAD
		FromVersion: cur.Version,
		ToVersion:   row.Version,
	})
	if err != nil {
		return nil, dbError("skip: audit", err)
	}
	return &SkipResult{ID: id, FromVersion: cur.Version, Version: row.Version, OrderingKey: row.OrderingKey,
		Promoted: len(woken) > 0, AuditID: audit.ID}, nil
}
