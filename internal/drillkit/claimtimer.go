package drillkit

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClaimTimer is a pgx.QueryTracer and pgx.BatchTracer that times the
// worker's claim statement (ReceiptClaim). Set it as the worker pool's
// ConnConfig.Tracer.
type ClaimTimer struct {
	mu   sync.Mutex
	took []time.Duration
}

type claimStart struct{}

// TraceQueryStart implements pgx.QueryTracer.
func (c *ClaimTimer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "-- name: ReceiptClaim ") {
		return context.WithValue(ctx, claimStart{}, time.Now())
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *ClaimTimer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	t0, ok := ctx.Value(claimStart{}).(time.Time)
	if !ok || data.Err != nil {
		return
	}
	c.mu.Lock()
	c.took = append(c.took, time.Since(t0))
	c.mu.Unlock()
}

// Take returns the claim durations recorded since the last Take, sorted.
func (c *ClaimTimer) Take() []time.Duration {
	c.mu.Lock()
	took := c.took
	c.took = nil
	c.mu.Unlock()
	slices.Sort(took)
	return took
}

// Percentile of sorted d, nearest-rank; 0 for none.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d))*p/100+0.999999) - 1
	return d[max(0, min(i, len(d)-1))]
}

// TraceBatchStart implements pgx.BatchTracer: a claim sent in a pipeline
// with its transaction's BEGIN and COMMIT (pipetx) is timed from the batch's
// start to its end, one round trip.
func (c *ClaimTimer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if data.Batch == nil {
		return ctx
	}
	for _, q := range data.Batch.QueuedQueries {
		if strings.Contains(q.SQL, "-- name: ReceiptClaim ") {
			return context.WithValue(ctx, claimStart{}, time.Now())
		}
	}
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *ClaimTimer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *ClaimTimer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	c.TraceQueryEnd(ctx, nil, pgx.TraceQueryEndData{Err: data.Err})
}
