package otelinbox_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/otelinbox"
)

// The backlog gauges cost one query that reads only active receipts: with
// 20,000 COMPLETED receipts retained, its plan reads only the queue table,
// never the retained history. The statement is the one the gauges really
// sent, captured on the connection.
func TestBacklogQueryReadsOnlyActiveReceipts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := &queryRecorder{}
	r := newRig(t, otelinbox.Config{})
	r.pool = inboxtest.Pool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = rec })
	_, err := r.pool.Exec(ctx, `
		INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id, event_type,
			schema_version, fingerprint, payload, status, attempts, completed_at)
		SELECT gen_random_uuid(), 'global', '', 'checkout', $1, 'done-' || g, 'order.created', 1,
			sha256(g::text::bytea), '{}', 'COMPLETED', 1, now()
		FROM generate_series(1, 20000) g`, consumer)
	if err != nil {
		t.Fatal(err)
	}
	client := r.client(t)
	for i := range 3 {
		if _, err := client.Accept(ctx, order(fmt.Sprint("evt-", i), i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.pool.Exec(ctx, "ANALYZE pginbox_receipts"); err != nil {
		t.Fatal(err)
	}
	b, err := r.tel.ObserveBacklog(r.pool)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec.start()
	rm := r.metrics(t)
	queries := rec.stop()
	wantGauge(t, rm, otelinbox.MetricBacklogDue, 3, semconv.MessagingDestinationName(consumer))

	var stats []recorded
	for _, q := range queries {
		// A catalog lookup naming the table (the operator view's row-level
		// security check) reads pg_class, not the receipts.
		if strings.Contains(q.sql, "pginbox_receipts") && !strings.Contains(q.sql, "pg_catalog.pg_class") {
			t.Errorf("the backlog query reads the retained receipts: %s", q.sql)
		}
		if strings.Contains(q.sql, "FROM pginbox_work") {
			stats = append(stats, q)
		}
	}
	if len(stats) != 1 {
		t.Fatalf("%d queries on the queue table per collection, want 1: %v", len(stats), queries)
	}
	var plan string
	if err := r.pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+stats[0].sql, stats[0].args...).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, `"pginbox_receipts"`) {
		t.Errorf("the backlog query's plan reads the retained receipts (COMPLETED history):\n%s", plan)
	}
}

// A failing backlog query reports nothing (no stale numbers), says so in the
// log and in Err, and the next collection tries again.
func TestBacklogQueryFailure(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	r := newRig(t, otelinbox.Config{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
	b, err := r.tel.ObserveBacklog(r.pool)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := r.pool.Exec(context.Background(), "DROP TABLE pginbox_audit, pginbox_receipts, pginbox_work CASCADE"); err != nil {
		t.Fatal(err)
	}
	rm := r.metrics(t)
	if ps := points(t, rm, otelinbox.MetricBacklogDue); len(ps) != 0 {
		t.Errorf("gauges after a failed query: %v", ps)
	}
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "inbox migrate up") {
		t.Errorf("Err() = %v, want the missing schema with its fix", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "backlog query failed") {
		t.Errorf("log: %s", logs.String())
	}
}

// Named consumers report zeros before they have receipts.
func TestBacklogNamedConsumers(t *testing.T) {
	t.Parallel()
	r := newRig(t, otelinbox.Config{})
	b, err := r.tel.ObserveBacklog(r.pool, consumer, "billing.v1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rm := r.metrics(t)
	for _, c := range []string{consumer, "billing.v1"} {
		wantGauge(t, rm, otelinbox.MetricBacklogDue, 0, semconv.MessagingDestinationName(c))
		wantGauge(t, rm, otelinbox.MetricBacklogReceipts, 0, semconv.MessagingDestinationName(c), otelinbox.AttrStatus.String("DEAD"))
	}
}

// Close unregisters the gauges.
func TestBacklogClose(t *testing.T) {
	t.Parallel()
	r := newRig(t, otelinbox.Config{})
	if _, err := r.client(t).Accept(context.Background(), order("a", 1)); err != nil {
		t.Fatal(err)
	}
	b, err := r.tel.ObserveBacklog(r.pool)
	if err != nil {
		t.Fatal(err)
	}
	if ps := points(t, r.metrics(t), otelinbox.MetricBacklogDue); len(ps) != 1 {
		t.Fatalf("%d due points, want 1", len(ps))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if ps := points(t, r.metrics(t), otelinbox.MetricBacklogDue); len(ps) != 0 {
		t.Errorf("%d due points after Close, want 0", len(ps))
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// queryRecorder is a pgx tracer that keeps the statements sent while on.
type queryRecorder struct {
	mu      sync.Mutex
	on      bool
	queries []recorded
}

type recorded struct {
	sql  string
	args []any
}

func (q *queryRecorder) start() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.on, q.queries = true, nil
}

func (q *queryRecorder) stop() []recorded {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.on = false
	return q.queries
}

func (q *queryRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.on {
		q.queries = append(q.queries, recorded{sql: d.SQL, args: d.Args})
	}
	return ctx
}

func (q *queryRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
