package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
)

// accept1 is Accept without middleware.
func (c *Client) accept1(ctx context.Context, msg Message) (AcceptResult, error) {
	d, err := c.prepare(msg)
	if err != nil {
		return AcceptResult{}, err
	}
	if c.closed.Load() {
		return AcceptResult{}, ErrClientClosed
	}
	if c.group != nil {
		// A batch with keyed messages runs as one transaction that takes
		// their keys' locks (acceptBatchOwn).
		return c.group.accept(ctx, d)
	}
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return AcceptResult{}, fmt.Errorf("pginbox: accept: acquiring a connection: %w", err)
	}
	defer conn.Release()
	if d.orderingKey != "" {
		// A transaction of its own: the key's lock, then the insert.
		var it BatchItem
		if err := c.acceptBatchOwn(ctx, conn, []batchEntry{{d: d}}, func(_ int, i BatchItem) { it = i }); err != nil {
			return AcceptResult{}, err
		}
		return itemResult(it)
	}
	notify := c.wakeups.inline(d.identity.Scope)
	distributed, err := c.layout.get(ctx, conn)
	if err != nil {
		return AcceptResult{}, dbError("accept", err)
	}
	run := func(withScope bool) (AcceptResult, error) {
		var insert func() (db.ReceiptAcceptRow, error)
		if distributed {
			insert = func() (db.ReceiptAcceptRow, error) { return acceptRouted(ctx, conn, d, notify, withScope) }
		}
		return c.accept(ctx, c.acceptQueries(conn, d.identity.Scope, withScope, distributed), d, notify, true, insert)
	}
	wasScoped := c.scopeAccepts.Load()
	res, err := run(wasScoped)
	if err != nil && !wasScoped && isInsufficientPrivilege(err) {
		// Row-level security is on (WITH CHECK refuses the insert before any
		// conflict check, so nothing was written): apply the scope from now on.
		c.scopeAccepts.Store(true)
		res, err = run(true)
	}
	if err == nil && res.Outcome == Accepted && !notify {
		c.wakeups.later([]string{d.identity.Consumer}, []Scope{d.identity.Scope})
	}
	return res, err
}

// acceptQueries runs Accept's statements on conn, withScope in the same round
// trip and transaction.
func (c *Client) acceptQueries(conn *pgxpool.Conn, s Scope, withScope, distributed bool) *db.Queries {
	if withScope {
		return db.New(scoped(conn, s, distributed))
	}
	return db.New(conn)
}

// isInsufficientPrivilege reports SQLSTATE 42501, which row-level security
// raises for a row outside the transaction's scope.
func isInsufficientPrivilege(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// acceptTx is AcceptTx without middleware.
func (c *Client) acceptTx(ctx context.Context, tx pgx.Tx, msg Message) (AcceptResult, error) {
	d, err := c.prepare(msg)
	if err != nil {
		return AcceptResult{}, err
	}
	if d.orderingKey != "" {
		var it BatchItem
		if err := c.acceptBatchCaller(ctx, tx, []batchEntry{{d: d}}, func(_ int, i BatchItem) { it = i }); err != nil {
			return AcceptResult{}, err
		}
		return itemResult(it)
	}
	distributed, err := c.layout.get(ctx, tx)
	if err != nil {
		return AcceptResult{}, dbError("accept", err)
	}
	if err := ensureScope(ctx, tx, d.identity.Scope, distributed); err != nil {
		return AcceptResult{}, err
	}
	var insert func() (db.ReceiptAcceptRow, error)
	if distributed {
		// ReceiptAccept would run in steps through the coordinator.
		insert = func() (db.ReceiptAcceptRow, error) { return acceptRoutedTx(ctx, tx, d) }
	}
	// Inside the caller's transaction: a rollback must not wake anyone.
	return c.accept(ctx, db.New(tx), d, true, false, insert)
}

// accept inserts d with insert (ReceiptAccept on q when nil) and reads the
// existing receipt on q when the identity exists.
func (c *Client) accept(ctx context.Context, q *db.Queries, d *draft, notify, autocommit bool, insert func() (db.ReceiptAcceptRow, error)) (AcceptResult, error) {
	if insert == nil {
		insert = func() (db.ReceiptAcceptRow, error) { return q.ReceiptAccept(ctx, d.acceptParams(notify)) }
	}
	row, err := insert()
	if err == nil {
		return AcceptResult{Outcome: Accepted, ID: row.ID, Status: Status(row.Status)}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		if autocommit && !certainlyNotCommitted(ctx, err) {
			return AcceptResult{}, fmt.Errorf("%w: %w", ErrCommitUncertain, err)
		}
		return AcceptResult{}, dbError("accept", err)
	}
	// The identity exists. ON CONFLICT waited for any concurrent inserter to finish,
	// so the row is committed and this new statement sees it.
	id := d.identity
	existing, err := q.ReceiptByIdentity(ctx, db.ReceiptByIdentityParams{
		ScopeKind: string(id.Scope.Kind), ScopeID: id.Scope.ID, Source: id.Source,
		Consumer: id.Consumer, MessageID: id.MessageID,
	})
	if err != nil {
		return AcceptResult{}, dbError("accept: reading the existing receipt", err)
	}
	if !bytes.Equal(existing.Fingerprint, d.fingerprint[:]) {
		return AcceptResult{}, &ConflictError{Identity: id, ReceiptID: existing.ID}
	}
	return AcceptResult{Outcome: Duplicate, ID: existing.ID, Status: liveStatus(existing.Status)}, nil
}

// draft is a validated message with everything a new receipt stores.
type draft struct {
	id            ID
	identity      Identity
	eventType     string
	schemaVersion int32
	fingerprint   [32]byte
	payload       string // canonical JSON
	metadata      string // a JSON object of strings
	maxAttempts   int32
	orderingKey   string // "" for an unordered message
}

// prepare validates msg and computes everything stored with it.
func (c *Client) prepare(msg Message) (*draft, error) {
	if err := validateIdentity(msg.Identity); err != nil {
		return nil, err
	}
	if c.declared != nil && !c.declared[msg.Consumer] {
		return nil, &ValidationError{Field: "consumer", Rule: RuleUndeclared,
			Detail: fmt.Sprintf("%q is not in Config.Consumers; add it there or fix the name", msg.Consumer)}
	}
	if err := validateString("event_type", msg.EventType); err != nil {
		return nil, err
	}
	if err := validateSchemaVersion(msg.SchemaVersion); err != nil {
		return nil, err
	}
	if msg.OrderingKey != "" {
		if err := validateString("ordering_key", msg.OrderingKey); err != nil {
			return nil, err
		}
	}
	canon, err := canonicalize(msg.Payload, c.limits)
	if err != nil {
		return nil, err
	}
	md, err := encodeMetadata(msg.Metadata, c.cfg.MaxMetadataBytes)
	if err != nil {
		return nil, err
	}
	return &draft{
		id:            inboxtype.New(),
		identity:      msg.Identity,
		eventType:     msg.EventType,
		schemaVersion: int32(msg.SchemaVersion),
		fingerprint:   Fingerprint(msg.EventType, msg.SchemaVersion, canon),
		payload:       string(canon),
		metadata:      md,
		maxAttempts:   int32(c.cfg.MaxAttempts),
		orderingKey:   msg.OrderingKey,
	}, nil
}

func (d *draft) acceptParams(notify bool) db.ReceiptAcceptParams {
	return db.ReceiptAcceptParams{
		ID:            d.id,
		ScopeKind:     string(d.identity.Scope.Kind),
		ScopeID:       d.identity.Scope.ID,
		Source:        d.identity.Source,
		Consumer:      d.identity.Consumer,
		MessageID:     d.identity.MessageID,
		EventType:     d.eventType,
		SchemaVersion: d.schemaVersion,
		Fingerprint:   d.fingerprint[:],
		Payload:       &d.payload,
		Metadata:      d.metadata,
		MaxAttempts:   d.maxAttempts,
		Notify:        notify,
	}
}
