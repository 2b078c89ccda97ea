package outbox

import (
	"context"
	"slices"
)

// EmitFunc emits one event: Emit itself, or the next middleware.
type EmitFunc func(ctx context.Context, tx Tx, ev Event) (ID, error)

// EmitMiddleware wraps Emit calls, for tracing: it sees the event before
// validation and the ID or error after the insert. It may change the event
// (a copy: Event is a value), for example to add trace context to its
// metadata.
type EmitMiddleware func(next EmitFunc) EmitFunc

type emitMiddlewareKey struct{}

// WithEmitMiddleware returns a copy of ctx whose Emit calls run through mw,
// inside the middleware ctx already carries (the first of mw is the
// outermost of those added). Emit is a function of the handler's or the
// caller's context, not of a configured client, so this is where its
// middleware lives: otelinbox's handler middleware adds its emit span to
// every handler's context this way.
func WithEmitMiddleware(ctx context.Context, mw ...EmitMiddleware) context.Context {
	if len(mw) == 0 {
		return ctx
	}
	prev, _ := ctx.Value(emitMiddlewareKey{}).([]EmitMiddleware)
	return context.WithValue(ctx, emitMiddlewareKey{}, append(slices.Clip(prev), mw...))
}

// withMiddleware returns f wrapped in the middleware ctx carries.
func withMiddleware(ctx context.Context, f EmitFunc) EmitFunc {
	mw, _ := ctx.Value(emitMiddlewareKey{}).([]EmitMiddleware)
	for i := len(mw) - 1; i >= 0; i-- {
		f = mw[i](f)
	}
	return f
}
