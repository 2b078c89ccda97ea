package outbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/driver"
	"github.com/pginbox/pginbox/internal/metadata"
	"github.com/pginbox/pginbox/schema"
)

// NotifyChannel is the PostgreSQL channel Emit notifies, so listening relays
// wake up without waiting for their next poll.
const NotifyChannel = "pginbox_outbox"

// Tx is what Emit writes through: a pgx.Tx, a handler's m.Tx, or anything
// else with pgx's Exec, Query and QueryRow. A *pgxpool.Pool or *pgx.Conn
// emits outside any transaction, the event committing on its own.
type Tx interface {
	// Exec is pgx's Exec.
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	// Query is pgx's Query.
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	// QueryRow is pgx's QueryRow.
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrDuplicateEvent is Emit's error for an ID the outbox already holds.
// Nothing was written and the caller's transaction is still usable.
var ErrDuplicateEvent = errors.New("pginbox: outbox event ID already emitted")

// Emit writes ev into tx and returns its ID. The event is published only if
// tx commits; emitting also wakes listening relays at that commit.
//
// An invalid event is an *inbox.ValidationError naming the field and rule,
// and nothing is written: identity-string rules for Type, Source,
// Destination and a non-empty OrderingKey, SchemaVersion from 1,
// inbox.Canonicalize's rules for Payload, and a receiving inbox's default
// rules for Metadata (valid UTF-8 without U+0000, at most
// inbox.DefaultMaxMetadataBytes as jsonb stores it). An ID the outbox
// already holds is ErrDuplicateEvent. With an ordering key, Emit waits for
// other open transactions that emitted for the same key to end (on Citus:
// for the same key in the same scope).
//
// Middleware that ctx carries (WithEmitMiddleware) wraps the call.
func Emit(ctx context.Context, tx Tx, ev Event) (ID, error) {
	return withMiddleware(ctx, emit)(ctx, tx, ev)
}

// emit is Emit without middleware.
func emit(ctx context.Context, tx Tx, ev Event) (ID, error) {
	if tx == nil {
		return ID{}, errors.New("pginbox: outbox emit: tx is nil: pass the transaction the event commits with (a handler's m.Tx, a pgx.Tx)")
	}
	p, err := prepare(ctx, ev)
	if err != nil {
		return ID{}, err
	}
	q := db.New(tx)
	drv, err := driver.For(ctx, tx)
	if err != nil {
		return ID{}, dbError("outbox emit: reading the outbox's layout (Citus or one server)", err)
	}
	err = drv.Outbox().Insert(ctx, q, p)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return ID{}, fmt.Errorf("%w: %s exists: leave Event.ID zero for a new event, or emit each event once", ErrDuplicateEvent, p.ID)
		}
		return ID{}, dbError("outbox emit", err)
	}
	if err := q.OutboxNotify(ctx); err != nil {
		return ID{}, dbError("outbox emit: waking relays", err)
	}
	return p.ID, nil
}

// prepare validates ev and computes the row Emit inserts.
func prepare(ctx context.Context, ev Event) (db.OutboxEventInsertParams, error) {
	for _, f := range []struct{ name, v string }{
		{"event_type", ev.Type},
		{"source", ev.Source},
		{"destination", ev.Destination},
	} {
		if err := checkString(f.name, f.v); err != nil {
			return db.OutboxEventInsertParams{}, err
		}
	}
	if ev.OrderingKey != "" {
		if err := checkString("ordering_key", ev.OrderingKey); err != nil {
			return db.OutboxEventInsertParams{}, err
		}
	}
	if ev.SchemaVersion < 1 || ev.SchemaVersion > math.MaxInt32 {
		return db.OutboxEventInsertParams{}, &inbox.ValidationError{Field: "schema_version", Rule: inbox.RuleOutOfRange,
			Detail: fmt.Sprintf("%d: must be between 1 and %d", ev.SchemaVersion, math.MaxInt32)}
	}
	canon, err := inbox.Canonicalize(ev.Payload)
	if err != nil {
		return db.OutboxEventInsertParams{}, err
	}
	md, prob := metadata.Encode(carryOver(ctx, ev.Metadata))
	if prob != nil {
		return db.OutboxEventInsertParams{}, &inbox.ValidationError{Field: "metadata", Rule: inbox.Rule(prob.Rule), Detail: prob.Detail}
	}
	id := ev.ID
	if id.IsZero() {
		id = inboxtype.New()
	}
	receipt, tenant := emittingReceipt(ctx)
	return db.OutboxEventInsertParams{
		ReceiptID:     receipt,
		ReceiptTenant: tenant,
		ID:            id,
		Source:        ev.Source,
		Destination:   ev.Destination,
		OrderingKey:   ev.OrderingKey,
		EventType:     ev.Type,
		SchemaVersion: int32(ev.SchemaVersion),
		Payload:       string(canon),
		Metadata:      md,
	}, nil
}

// emittingReceipt is the receipt whose handler ctx belongs to, and its
// tenant ("" for the global scope); the zero ID outside a handler.
func emittingReceipt(ctx context.Context) (inboxtype.ID, string) {
	m, ok := handler.MsgFromContext(ctx)
	if !ok {
		return inboxtype.ID{}, ""
	}
	return m.ReceiptID, m.Scope.ID
}

// carryOver returns md with the handled message's context added, when ctx
// is a handler's. md itself is never changed.
func carryOver(ctx context.Context, md map[string]string) map[string]string {
	m, ok := handler.MsgFromContext(ctx)
	if !ok {
		return md
	}
	out := maps.Clone(md)
	if out == nil {
		out = map[string]string{}
	}
	set := func(k, v string) {
		if _, given := out[k]; !given && v != "" {
			out[k] = v
		}
	}
	set(MetadataCausationID, m.MessageID)
	for _, k := range []string{MetadataCorrelationID, MetadataTraceparent, MetadataTracestate} {
		set(k, m.Metadata[k])
	}
	return out
}

// checkString applies the identity string rules to field.
func checkString(field, s string) error {
	if rule, detail := inboxtype.CheckIdentityString(s); rule != "" {
		return &inbox.ValidationError{Field: field, Rule: inbox.Rule(rule), Detail: detail}
	}
	return nil
}

// dbError wraps a database error, naming a missing schema as such.
func dbError(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "42703") {
		return fmt.Errorf("%w: run `inbox migrate up` (%s: %w)", schema.ErrNotMigrated, op, err)
	}
	return fmt.Errorf("pginbox: %s: %w", op, err)
}
