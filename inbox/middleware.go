package inbox

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// AcceptFunc accepts one message: Client.Accept, or Client.AcceptTx bound to
// its transaction.
type AcceptFunc func(ctx context.Context, msg Message) (AcceptResult, error)

// AcceptMiddleware wraps every Accept and AcceptTx call, for tracing, metrics
// or logging. It sees the message before validation and the outcome after the
// commit (for AcceptTx: after the insert, since the caller commits). The
// first middleware of Config.AcceptMiddleware is the outermost.
type AcceptMiddleware func(next AcceptFunc) AcceptFunc

// AcceptBatchFunc accepts a batch: Client.AcceptBatch, or Client.AcceptBatchTx
// bound to its transaction.
type AcceptBatchFunc func(ctx context.Context, msgs []Message) ([]BatchItem, error)

// AcceptBatchMiddleware wraps every AcceptBatch and AcceptBatchTx call.
type AcceptBatchMiddleware func(next AcceptBatchFunc) AcceptBatchFunc

func chainAccept(mw []AcceptMiddleware, f AcceptFunc) AcceptFunc {
	for i := len(mw) - 1; i >= 0; i-- {
		f = mw[i](f)
	}
	return f
}

func chainAcceptBatch(mw []AcceptBatchMiddleware, f AcceptBatchFunc) AcceptBatchFunc {
	for i := len(mw) - 1; i >= 0; i-- {
		f = mw[i](f)
	}
	return f
}

// Accept stores msg durably and returns after its own transaction commits:
// Accepted for a new identity, Duplicate (with the existing receipt's current
// status) when the identity and content match a retained receipt.
//
// Errors: *ValidationError (ErrInvalid) and *ConflictError (ErrIdentityConflict)
// when the message can never be stored as it is; ErrCommitUncertain when the
// connection failed after the insert was sent; anything else is a storage failure.
// ActionFor tells a transport what to do with each.
//
// A message with an OrderingKey is accepted in a transaction that takes the
// key's lock (with Config.GroupCommit, the batch's transaction) and queues it
// behind the earlier receipts of its key.
func (c *Client) Accept(ctx context.Context, msg Message) (AcceptResult, error) {
	return c.acceptFn(ctx, msg)
}

// AcceptTx is Accept inside the caller's transaction: the receipt commits or rolls
// back with it, and the caller owns the commit (and its uncertainty).
//
// A transaction without a scope gets the message's (ApplyScope), and keeps
// it; one already scoped to another scope is refused with a
// *ScopeMismatchError (ErrScopeMismatch) before anything is written, and stays
// usable.
//
// A message with an OrderingKey takes its key's lock, held until tx ends:
// other accepts of the key, and the promotion of its next receipt when the
// key's head completes, wait for tx. Keep such transactions short.
func (c *Client) AcceptTx(ctx context.Context, tx pgx.Tx, msg Message) (AcceptResult, error) {
	f := func(ctx context.Context, msg Message) (AcceptResult, error) { return c.acceptTx(ctx, tx, msg) }
	if len(c.cfg.AcceptMiddleware) == 0 {
		return f(ctx, msg)
	}
	return chainAccept(c.cfg.AcceptMiddleware, f)(ctx, msg)
}

// AcceptBatch accepts many messages with one multi-row insert and one commit, for
// transports that acknowledge per batch (Kafka offsets, NATS ack-all). It returns
// one item per message, in order. An invalid or conflicting message does not stop
// the others; repeats of one identity inside the batch resolve to one receipt
// (the first wins; a repeat is a Duplicate of it, or a Conflict when its content
// differs).
//
// The error is for the whole batch, and then no item is reliable: a storage
// failure, or ErrCommitUncertain when the connection failed after the insert was
// sent. Do not acknowledge any message then; redeliveries reconcile.
//
// The batch travels in one statement, so bound its size (hundreds, not millions).
// A batch of several scopes is one transaction with one statement per scope,
// each after its scope is applied. Messages with an OrderingKey make the batch
// one transaction that first locks their keys (in a fixed order) and inserts
// them one statement each, in batch order: messages of one key are ordered as
// the batch lists them.
func (c *Client) AcceptBatch(ctx context.Context, msgs []Message) ([]BatchItem, error) {
	return c.acceptBatchFn(ctx, msgs)
}

// AcceptBatchTx is AcceptBatch inside the caller's transaction: the receipts
// commit or roll back with it, and the caller owns the commit. Whatever items
// say, nothing is stored unless tx commits.
//
// A transaction already scoped takes messages of its scope only (a
// *ScopeMismatchError otherwise, nothing written). One without a scope gets
// the batch's scope and keeps it, or, for several scopes, each group's in
// turn and none once the call returns.
func (c *Client) AcceptBatchTx(ctx context.Context, tx pgx.Tx, msgs []Message) ([]BatchItem, error) {
	f := func(ctx context.Context, msgs []Message) ([]BatchItem, error) { return c.acceptBatchTx(ctx, tx, msgs) }
	if len(c.cfg.AcceptBatchMiddleware) == 0 {
		return f(ctx, msgs)
	}
	return chainAcceptBatch(c.cfg.AcceptBatchMiddleware, f)(ctx, msgs)
}
