// Package handler is what a handler author sees: the per-message context, the
// handler function type, permanent errors, strict payload decoding and the
// registry that the worker dispatches from (and that `go generate` output fills).
package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/inboxtype"
)

// Msg describes the message being handled. Every database write of the handler
// must go through Tx: the worker adds the completion update to the same
// transaction and commits both together, or neither.
type Msg struct {
	// Tx is the message's transaction. It does everything a pgx.Tx does (Exec,
	// Query, QueryRow, CopyFrom, SendBatch, nested savepoints through Begin, an
	// application's sqlc Queries) except end the transaction: the worker owns
	// the commit. Commit and Rollback return ErrTxOwnedByWorker, and the
	// receipt goes DEAD, because a handler that commits by itself would apply
	// its writes again on every retry.
	Tx pgx.Tx

	ReceiptID     inboxtype.ID    // the receipt being handled
	Scope         inboxtype.Scope // the tenant (or global scope) the message was accepted in; Tx runs in it
	Source        string          // the producer system, as accepted
	Consumer      string          // the logical effect this receipt is for, e.g. "orders.projection.v1"
	MessageID     string          // the producer's event ID, stable across redeliveries
	EventType     string          // with SchemaVersion, the payload's shape (and the handler's Key)
	SchemaVersion int             // the payload's schema version
	// Attempt counts from 1; it is the attempt running now.
	Attempt     int
	MaxAttempts int               // the receipt's retry budget: after this many failed attempts it is DEAD
	Metadata    map[string]string // as accepted (trace headers, correlation IDs); not in the fingerprint
	// Payload is the canonical JSON stored at accept, byte for byte: the text
	// the fingerprint covers (RFC 8785 key order, exact numbers).
	Payload json.RawMessage
}

// Func handles one message. ctx is cancelled on shutdown, lease loss or the
// handler deadline. Returning nil completes the receipt; an error rolls back the
// transaction and schedules a retry, unless it is Permanent.
type Func func(ctx context.Context, m *Msg) error

// Middleware wraps a handler: tracing, metrics, logging, panics policy. It
// runs inside the message's transaction, around the handler call.
type Middleware func(next Func) Func

// Key selects the handler for a message.
type Key struct {
	Consumer      string // the receipt's consumer
	EventType     string // the message's event type
	SchemaVersion int    // the message's schema version: each version has its own handler
}

func (k Key) String() string {
	return fmt.Sprintf("%s <- %s v%d", k.Consumer, k.EventType, k.SchemaVersion)
}

// ErrTxOwnedByWorker is what Msg.Tx's Commit and Rollback return. Return nil
// from the handler to commit, or an error to roll back.
var ErrTxOwnedByWorker = errors.New("pginbox: the worker owns the handler's transaction: return nil to commit it with the completion, or an error to roll it back; do not call Commit or Rollback on m.Tx")

// ErrPermanent matches errors wrapped with Permanent.
var ErrPermanent = errors.New("permanent failure")

type permanentError struct{ err error }

func (e *permanentError) Error() string        { return e.err.Error() }
func (e *permanentError) Unwrap() error        { return e.err }
func (e *permanentError) Is(target error) bool { return target == ErrPermanent }

// Permanent marks err as a failure that retrying cannot fix: the receipt goes
// DEAD at once, for an operator to inspect and requeue.
func Permanent(err error) error {
	if err == nil {
		err = ErrPermanent
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err (or anything it wraps) is permanent.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

// Validator is implemented by payload types that check themselves after
// decoding. A failure there is permanent.
type Validator interface {
	// Validate returns an error describing the first rule the value breaks.
	Validate() error
}

// DecodeOptions sets the payload decoding policy.
type DecodeOptions struct {
	// AllowUnknownFields accepts payload fields the Go type does not declare.
	// Defaults to false: an unknown field is a permanent decoding failure, so a
	// producer's schema change cannot be silently half-read.
	AllowUnknownFields bool
}

// Decode decodes the payload into a T strictly (one JSON value, unknown fields
// per opts) and runs T's Validate method if it has one. Every failure is
// permanent: the same payload will never decode on a retry.
func Decode[T any](m *Msg, opts DecodeOptions) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(m.Payload))
	if !opts.AllowUnknownFields {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(&v); err != nil {
		return v, Permanent(fmt.Errorf("decoding %s v%d payload into %T: %w", m.EventType, m.SchemaVersion, v, err))
	}
	if dec.More() {
		return v, Permanent(fmt.Errorf("decoding %s v%d payload: trailing data", m.EventType, m.SchemaVersion))
	}
	// &v has both pointer and value receiver methods.
	if val, ok := any(&v).(Validator); ok {
		if err := val.Validate(); err != nil {
			return v, Permanent(fmt.Errorf("validating %s v%d payload: %w", m.EventType, m.SchemaVersion, err))
		}
	}
	return v, nil
}

// Typed adapts a function taking a decoded payload into a Func.
func Typed[T any](opts DecodeOptions, fn func(ctx context.Context, m *Msg, payload T) error) Func {
	return func(ctx context.Context, m *Msg) error {
		v, err := Decode[T](m, opts)
		if err != nil {
			return err
		}
		return fn(ctx, m, v)
	}
}

// ErrDuplicateHandler is returned when a Key is registered twice.
var ErrDuplicateHandler = errors.New("handler registered twice")

// Registry maps keys to handlers. Fill it before starting a worker; it is not
// safe for concurrent registration.
type Registry struct {
	handlers  map[Key]Func
	consumers map[string]bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{handlers: map[Key]Func{}, consumers: map[string]bool{}}
}

// Register adds fn for k. Registering a key twice is an error, caught at start-up
// rather than by whichever handler happens to win.
func (r *Registry) Register(k Key, fn Func) error {
	return r.RegisterAll(Entry{Key: k, Func: fn})
}

// Lookup returns the handler for k.
func (r *Registry) Lookup(k Key) (Func, bool) {
	fn, ok := r.handlers[k]
	return fn, ok
}

// HasConsumer reports whether any handler is registered for consumer.
func (r *Registry) HasConsumer(consumer string) bool { return r.consumers[consumer] }

// Consumers returns the consumers with at least one handler, sorted.
func (r *Registry) Consumers() []string {
	out := make([]string, 0, len(r.consumers))
	for c := range r.consumers {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

type msgKey struct{}

// ContextWithMsg returns ctx carrying m. The worker gives every handler such
// a context, so code the handler calls (an outbox Emit, a tracer) can find
// the message it runs for without extra parameters.
func ContextWithMsg(ctx context.Context, m *Msg) context.Context {
	return context.WithValue(ctx, msgKey{}, m)
}

// MsgFromContext returns the message a handler's context carries, if any.
func MsgFromContext(ctx context.Context) (*Msg, bool) {
	m, ok := ctx.Value(msgKey{}).(*Msg)
	return m, ok
}
