package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/schema"
)

// Accept stores msg durably and returns after its own transaction commits:
// Accepted for a new identity, Duplicate (with the existing receipt's current
// status) when the identity and content match a retained receipt.
//
// Errors: *ValidationError (ErrInvalid) and *ConflictError (ErrIdentityConflict)
// when the message can never be stored as it is; ErrCommitUncertain when the
// connection failed after the insert was sent; anything else is a storage failure.
// ActionFor tells a transport what to do with each.
func (c *Client) Accept(ctx context.Context, msg Message) (AcceptResult, error) {
	p, err := c.prepare(msg)
	if err != nil {
		return AcceptResult{}, err
	}
	if c.group != nil {
		return c.group.accept(ctx, p)
	}
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return AcceptResult{}, fmt.Errorf("pginbox: accept: acquiring a connection: %w", err)
	}
	defer conn.Release()
	p.Notify = c.wakeups.inline()
	res, err := c.accept(ctx, db.New(conn), p, true)
	if err == nil && res.Outcome == Accepted && !p.Notify {
		c.wakeups.later(p.Consumer)
	}
	return res, err
}

// AcceptTx is Accept inside the caller's transaction: the receipt commits or rolls
// back with it, and the caller owns the commit (and its uncertainty).
func (c *Client) AcceptTx(ctx context.Context, tx pgx.Tx, msg Message) (AcceptResult, error) {
	p, err := c.prepare(msg)
	if err != nil {
		return AcceptResult{}, err
	}
	p.Notify = true // inside the caller's transaction: a rollback must not wake anyone
	return c.accept(ctx, db.New(tx), p, false)
}

func (c *Client) accept(ctx context.Context, q *db.Queries, p db.ReceiptAcceptParams, autocommit bool) (AcceptResult, error) {
	row, err := q.ReceiptAccept(ctx, p)
	if err == nil {
		return AcceptResult{Outcome: Accepted, ID: row.ID, Status: Status(row.Status)}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		if autocommit {
			return AcceptResult{}, commitError(ctx, err)
		}
		return AcceptResult{}, dbError("accept", err)
	}
	// The identity exists. ON CONFLICT waited for any concurrent inserter to finish,
	// so the row is committed and this new statement sees it.
	existing, err := q.ReceiptByIdentity(ctx, db.ReceiptByIdentityParams{
		ScopeKind: p.ScopeKind, ScopeID: p.ScopeID, Source: p.Source,
		Consumer: p.Consumer, MessageID: p.MessageID,
	})
	if err != nil {
		return AcceptResult{}, dbError("accept: reading the existing receipt", err)
	}
	if !bytes.Equal(existing.Fingerprint, p.Fingerprint) {
		return AcceptResult{}, &ConflictError{
			Identity: Identity{
				Scope:  Scope{Kind: ScopeKind(p.ScopeKind), ID: p.ScopeID},
				Source: p.Source, Consumer: p.Consumer, MessageID: p.MessageID,
			},
			ReceiptID: existing.ID,
		}
	}
	return AcceptResult{Outcome: Duplicate, ID: existing.ID, Status: Status(existing.Status)}, nil
}

// prepare validates msg and computes everything stored with it.
func (c *Client) prepare(msg Message) (db.ReceiptAcceptParams, error) {
	if err := validateIdentity(msg.Identity); err != nil {
		return db.ReceiptAcceptParams{}, err
	}
	if c.declared != nil && !c.declared[msg.Consumer] {
		return db.ReceiptAcceptParams{}, &ValidationError{Field: "consumer", Rule: RuleUndeclared,
			Detail: fmt.Sprintf("%q is not in Config.Consumers; add it there or fix the name", msg.Consumer)}
	}
	if err := validateString("event_type", msg.EventType); err != nil {
		return db.ReceiptAcceptParams{}, err
	}
	if err := validateSchemaVersion(msg.SchemaVersion); err != nil {
		return db.ReceiptAcceptParams{}, err
	}
	canon, err := canonicalize(msg.Payload, c.limits)
	if err != nil {
		return db.ReceiptAcceptParams{}, err
	}
	md, err := encodeMetadata(msg.Metadata)
	if err != nil {
		return db.ReceiptAcceptParams{}, err
	}
	fp := Fingerprint(msg.EventType, msg.SchemaVersion, canon)
	payload := string(canon)
	return db.ReceiptAcceptParams{
		ID:            inboxtype.New(),
		ScopeKind:     string(msg.Scope.Kind),
		ScopeID:       msg.Scope.ID,
		Source:        msg.Source,
		Consumer:      msg.Consumer,
		MessageID:     msg.MessageID,
		EventType:     msg.EventType,
		SchemaVersion: int32(msg.SchemaVersion),
		Fingerprint:   fp[:],
		Payload:       &payload,
		Metadata:      md,
		MaxAttempts:   int32(c.cfg.MaxAttempts),
	}, nil
}

// commitError classifies a failed autocommit statement. A server error, or a
// context that was already done so nothing was sent, certainly did not commit.
// Anything else may have happened after the server committed. pgx's SafeToRetry
// is not enough: a reply lost after sending can surface as "conn closed".
func commitError(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	notSent := pgconn.SafeToRetry(err) && ctx.Err() != nil && errors.Is(err, ctx.Err())
	if errors.As(err, &pgErr) || notSent {
		return dbError("accept", err)
	}
	return fmt.Errorf("%w: %w", ErrCommitUncertain, err)
}

// dbError wraps a database error, naming a missing schema as such.
func dbError(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "42703") {
		return fmt.Errorf("%w: run `inbox migrate up` (%s: %w)", schema.ErrNotMigrated, op, err)
	}
	return fmt.Errorf("pginbox: %s: %w", op, err)
}
