package outbox_test

import (
	"context"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
)

// Emit runs through the middleware its context carries, outermost first; a
// middleware may change the event it passes on, and sees the ID.
func TestEmitMiddlewareFromContext(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool := inboxtest.Pool(t)
	var calls []string
	tag := func(name string) outbox.EmitMiddleware {
		return func(next outbox.EmitFunc) outbox.EmitFunc {
			return func(ctx context.Context, tx outbox.Tx, ev outbox.Event) (outbox.ID, error) {
				calls = append(calls, name+" before")
				md := map[string]string{name: "1"}
				for k, v := range ev.Metadata {
					md[k] = v
				}
				ev.Metadata = md
				id, err := next(ctx, tx, ev)
				calls = append(calls, name+" after "+id.String())
				return id, err
			}
		}
	}
	plain := event("k", 1)
	plainID, err := outbox.Emit(ctx, pool, plain)
	is.NoErr(err)
	is.Equal(len(calls), 0) // no middleware without the context's

	mctx := outbox.WithEmitMiddleware(outbox.WithEmitMiddleware(ctx, tag("a")), tag("b"), tag("c"))
	ev := event("k", 2)
	id, err := outbox.Emit(mctx, pool, ev)
	is.NoErr(err)
	is.Equal(calls, []string{"a before", "b before", "c before", "c after " + id.String(), "b after " + id.String(), "a after " + id.String()})
	is.Equal(ev.Metadata, nil) // the caller's event is untouched
	var md map[string]string
	is.NoErr(pool.QueryRow(ctx, "SELECT metadata FROM pginbox_outbox WHERE id = $1", id).Scan(&md))
	is.Equal(md, map[string]string{"a": "1", "b": "1", "c": "1"})
	is.NoErr(pool.QueryRow(ctx, "SELECT metadata FROM pginbox_outbox WHERE id = $1", plainID).Scan(&md))
	is.Equal(md, map[string]string{})
	is.Equal(outbox.WithEmitMiddleware(ctx), ctx) // nothing to add
}
