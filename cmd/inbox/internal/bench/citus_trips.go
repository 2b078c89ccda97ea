package bench

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// roundTrips counts, client side, the round trips of every pool that copies
// the config it is set on (pgx copies the tracer with the config, and so do
// inbox.Nodes' node pools): one per Exec, Query or QueryRow outside a
// batch, one per SendBatch (a batch is one pipeline), one per statement
// prepared (not one found already prepared) and one per CopyFrom. Not
// seen: the prepares pgx pipelines ahead of a batch's new statements (once
// per statement and connection) and the pool's health check of a
// connection idle for over a second.
type roundTrips struct{ n atomic.Int64 }

var (
	_ pgx.QueryTracer    = (*roundTrips)(nil)
	_ pgx.BatchTracer    = (*roundTrips)(nil)
	_ pgx.PrepareTracer  = (*roundTrips)(nil)
	_ pgx.CopyFromTracer = (*roundTrips)(nil)
)

// count is the round trips so far; zero for a nil counter.
func (t *roundTrips) count() int64 {
	if t == nil {
		return 0
	}
	return t.n.Load()
}

func (t *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.n.Add(1)
	return ctx
}

func (t *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (t *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.n.Add(1)
	return ctx
}

func (t *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (t *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (t *roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return ctx
}

func (t *roundTrips) TracePrepareEnd(_ context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	if !d.AlreadyPrepared {
		t.n.Add(1)
	}
}

func (t *roundTrips) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	t.n.Add(1)
	return ctx
}

func (t *roundTrips) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}
