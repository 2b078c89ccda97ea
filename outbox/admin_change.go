package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox"
)

// RequeueResult is the outcome of a committed requeue.
type RequeueResult struct {
	ID          ID    // the DEAD event requeued
	FromVersion int64 // its version before
	// Version is the event's new version.
	Version int64
}

// Requeue sends a DEAD event back to PENDING with a fresh retry budget, due
// now, and wakes listening relays. The event must still be at
// expectedVersion (EventRow.Version), so two operators cannot both act on one
// decision.
//
// Errors: ErrNotFound, ErrVersionConflict, ErrWrongState (the event is not
// DEAD), an *inbox.ValidationError for a version below 1. None of them changed
// anything.
func (a *Admin) Requeue(ctx context.Context, id ID, expectedVersion int64) (*RequeueResult, error) {
	if expectedVersion < 1 {
		return nil, &inbox.ValidationError{Field: "expected_version", Rule: inbox.RuleRequired, Detail: "set it to the event's current version (EventRow.Version), which is at least 1"}
	}
	if err := a.checkScope(); err != nil {
		return nil, err
	}
	var res *RequeueResult
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		get := a.getParams(id)
		scopeID := get.ScopeID
		if a.scope == nil {
			// The update names the scope (on Citus: routed to its node).
			row, err := q.OutboxGet(ctx, get)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: %s", ErrNotFound, id)
			}
			if err != nil {
				return dbError("outbox requeue: reading the event's scope", err)
			}
			scopeID = row.ScopeID
		}
		version, err := q.OutboxRequeue(ctx, db.OutboxRequeueParams{ScopeID: scopeID, ID: id, ExpectedVersion: expectedVersion})
		if errors.Is(err, pgx.ErrNoRows) {
			return explainRefusal(ctx, q, get, expectedVersion)
		}
		if err != nil {
			return dbError("outbox requeue", err)
		}
		if err := q.OutboxNotify(ctx); err != nil {
			return dbError("outbox requeue: waking relays", err)
		}
		res = &RequeueResult{ID: id, FromVersion: expectedVersion, Version: version}
		return nil
	})
	if err != nil {
		return nil, err
	}
	a.log.Info("pginbox admin: requeued outbox event", "event_id", id, "version", res.Version)
	return res, nil
}

// explainRefusal says why a guarded requeue changed nothing.
func explainRefusal(ctx context.Context, q *db.Queries, get db.OutboxGetParams, expected int64) error {
	id := get.ID
	row, err := q.OutboxGet(ctx, get)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	case err != nil:
		return dbError("outbox requeue", err)
	case row.Version != expected:
		return fmt.Errorf("%w: requeue %s: expected version %d but the event is at version %d (it changed since it was read); look at it again and retry with version %d if the requeue still applies",
			ErrVersionConflict, id, expected, row.Version, row.Version)
	default:
		return fmt.Errorf("%w: cannot requeue event %s: it is %s, requeue needs DEAD", ErrWrongState, id, row.Status)
	}
}
