package otelinbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pginbox/pginbox/inbox"
)

// BacklogObserver reports the backlog gauges of one database.
type BacklogObserver struct {
	t    *Telemetry
	view *inbox.AdminView
	reg  metric.Registration

	mu     sync.Mutex
	last   *inbox.Stats
	lastAt time.Time
	err    error
	seen   map[string]bool  // consumers reported once: they report zeros once drained
	now    func() time.Time // the clock of the interval; tests replace it
}

// ObserveBacklog registers the backlog gauges for the inbox on pool, per
// consumer: pginbox.backlog.due, pginbox.backlog.oldest_due_age and
// pginbox.backlog.receipts by status (pending, processing, retryable,
// dead). They come from one query (the admin API's Stats without COMPLETED
// counts), which reads only the queue table of active and DEAD receipts, so
// its cost does not grow with COMPLETED history. It runs when the gauges are
// collected, at most once per Config.BacklogInterval; collections in
// between report its last result. The consumers named here, and every
// consumer seen with active receipts since, report zeros when they have
// none instead of vanishing. Close unregisters the gauges.
func (t *Telemetry) ObserveBacklog(pool *pgxpool.Pool, consumers ...string) (*BacklogObserver, error) {
	if pool == nil {
		return nil, errors.New("otelinbox: ObserveBacklog: pool is nil: pass the *pgxpool.Pool of the inbox's database")
	}
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: t.cfg.Logger})
	if err != nil {
		return nil, err
	}
	b := &BacklogObserver{t: t, view: admin.Operator(), seen: map[string]bool{}, now: time.Now}
	for _, c := range consumers {
		b.seen[c] = true
	}
	b.reg, err = t.meter.RegisterCallback(b.observe, t.backlogDue, t.backlogAge, t.backlogCounts)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Close unregisters the gauges.
func (b *BacklogObserver) Close() error { return b.reg.Unregister() }

// Err returns the last query's error, nil after a successful one.
func (b *BacklogObserver) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *BacklogObserver) observe(ctx context.Context, o metric.Observer) error {
	st, err := b.stats(ctx)
	if err != nil {
		// Logged here, not returned: a returned error would fail the whole
		// collection for readers that treat it so.
		b.t.cfg.Logger.WarnContext(ctx, "otelinbox: backlog query failed; the backlog gauges report nothing until it succeeds", "error", err)
		return nil
	}
	byName := make(map[string]inbox.ConsumerStats, len(st.Consumers))
	for _, c := range st.Consumers {
		byName[c.Consumer] = c
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for name := range byName {
		b.seen[name] = true
	}
	for name := range b.seen {
		c := byName[name] // zeros when drained
		base := []attribute.KeyValue{systemAttr, semconv.MessagingDestinationName(name)}
		o.ObserveInt64(b.t.backlogDue, c.Due, metric.WithAttributes(base...))
		o.ObserveFloat64(b.t.backlogAge, c.OldestDueAge.Seconds(), metric.WithAttributes(base...))
		for _, s := range []struct {
			status inbox.Status
			n      int64
		}{
			{inbox.StatusPending, c.Pending},
			{inbox.StatusProcessing, c.Processing},
			{inbox.StatusRetryable, c.Retryable},
			{inbox.StatusDead, c.Dead},
		} {
			o.ObserveInt64(b.t.backlogCounts, s.n, metric.WithAttributes(append(base, AttrStatus.String(string(s.status)))...))
		}
	}
	return nil
}

// stats runs the backlog query unless its last result is younger than
// Config.BacklogInterval.
func (b *BacklogObserver) stats(ctx context.Context) (*inbox.Stats, error) {
	b.mu.Lock()
	if b.last != nil && b.now().Sub(b.lastAt) < b.t.cfg.BacklogInterval {
		defer b.mu.Unlock()
		return b.last, nil
	}
	b.mu.Unlock()
	st, err := b.view.Stats(ctx, inbox.StatsParams{})
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err = err
	if err != nil {
		b.last = nil
		return nil, err
	}
	b.last, b.lastAt = st, b.now()
	return st, nil
}
