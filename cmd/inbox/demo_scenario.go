package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// demoScenario is the orders story `inbox demo` tells.
type demoScenario struct {
	out         *console
	e           *env
	pool        *pgxpool.Pool
	tenant      string
	consumer    string
	createTable string // CREATE TABLE [IF NOT EXISTS]
	external    bool   // a user's database: say what is left behind

	fixed     atomic.Bool // the "deploy" that makes the permanent failure go away
	attempts  atomic.Int64
	transient atomic.Int64
	permanent atomic.Int64
}

type demoOrder struct {
	OrderID  string  `json:"orderId"`
	Customer string  `json:"customer"`
	Total    float64 `json:"total"`
	Currency string  `json:"currency"`
}

// Two orders misbehave: the payment gateway times out on o-1004's first
// attempts, and o-1007's currency is not supported until the fix.
const (
	flakyOrder       = "o-1004"
	flakyFailures    = 3
	unsupportedOrder = "o-1007"
)

func demoOrders() []demoOrder {
	customers := []string{"ada", "grace", "linus", "barbara", "ken", "margaret", "dennis", "frances", "edsger", "radia"}
	var out []demoOrder
	for i, c := range customers {
		o := demoOrder{OrderID: fmt.Sprintf("o-%d", 1001+i), Customer: c, Total: float64(1990+i*1250) / 100, Currency: "EUR"}
		if o.OrderID == unsupportedOrder {
			o.Currency = "XXX"
		}
		out = append(out, o)
	}
	return out
}

// delivery is one message as a broker with at-least-once delivery hands it over.
type delivery struct {
	order demoOrder
	note  string // why this delivery is special
}

func demoDeliveries(orders []demoOrder) []delivery {
	byID := map[string]demoOrder{}
	for _, o := range orders {
		byID[o.OrderID] = o
	}
	changed := byID["o-1003"]
	changed.Total += 5
	var out []delivery
	for _, o := range orders {
		out = append(out, delivery{order: o})
		switch o.OrderID {
		case "o-1002", "o-1005", "o-1009":
			out = append(out, delivery{order: o, note: "redelivery"})
		case "o-1006":
			out = append(out, delivery{order: changed, note: fmt.Sprintf("o-1003 again, total changed %.2f -> %.2f", byID["o-1003"].Total, changed.Total)})
		}
	}
	return out
}

func (s *demoScenario) message(o demoOrder) inbox.Message {
	return inbox.Message{
		Identity: inbox.Identity{
			Scope:     inbox.Tenant(s.tenant),
			Source:    "checkout",
			Consumer:  s.consumer,
			MessageID: "evt-" + strings.TrimPrefix(o.OrderID, "o-"),
		},
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       o,
		Metadata:      map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
}

// handle is the business handler: project the order in the worker's transaction.
func (s *demoScenario) handle(ctx context.Context, m *handler.Msg, o demoOrder) error {
	s.attempts.Add(1)
	if o.OrderID == flakyOrder && m.Attempt <= flakyFailures {
		s.transient.Add(1)
		s.out.printf("  handle   %s  attempt %d: payment gateway timeout -> RETRYABLE, retried after a backoff\n", o.OrderID, m.Attempt)
		return errors.New("payment gateway timeout")
	}
	if o.Currency == "XXX" && !s.fixed.Load() {
		s.permanent.Add(1)
		s.out.printf("  handle   %s  attempt %d: unsupported currency %q -> permanent failure, DEAD\n", o.OrderID, m.Attempt, o.Currency)
		return handler.Permanent(fmt.Errorf("unsupported currency %q", o.Currency))
	}
	_, err := m.Tx.Exec(ctx, `INSERT INTO pginbox_demo_orders (tenant_id, order_id, customer, total, currency)
		VALUES ($1, $2, $3, $4, $5)`, m.Scope.ID, o.OrderID, o.Customer, o.Total, o.Currency)
	if err != nil {
		return err
	}
	if m.Attempt > 1 {
		s.out.printf("  handle   %s  attempt %d: projected\n", o.OrderID, m.Attempt)
	}
	return nil
}

// syncBuffer keeps the worker's warnings, shown only if the demo fails.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (s *demoScenario) run(ctx context.Context) (err error) {
	out := s.out
	if _, err := s.pool.Exec(ctx, s.createTable+` pginbox_demo_orders (
		tenant_id text NOT NULL,
		order_id  text NOT NULL,
		customer  text NOT NULL,
		total     numeric(12, 2) NOT NULL,
		currency  text NOT NULL,
		PRIMARY KEY (tenant_id, order_id))`); err != nil {
		return fmt.Errorf("creating the demo's business table: %w", err)
	}

	client, err := inbox.NewClient(s.pool, inbox.Config{Consumers: []string{s.consumer}, Logger: discardLogger})
	if err != nil {
		return err
	}
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: s.consumer, EventType: "order.created", SchemaVersion: 1},
		handler.Typed(handler.DecodeOptions{}, s.handle)); err != nil {
		return err
	}
	var logs syncBuffer
	w, err := inbox.NewWorker(s.pool, reg, inbox.WorkerConfig{
		Concurrency:    4,
		PollInterval:   100 * time.Millisecond,
		Lease:          5 * time.Second,
		HandlerTimeout: 5 * time.Second,
		ShutdownGrace:  2 * time.Second,
		// Short backoff so the demo's retries happen within seconds.
		Backoff: inbox.ExponentialBackoff(200*time.Millisecond, 2, 2*time.Second, 0.2),
		Logger:  slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		w.Stop(stopCtx)
		if err != nil && ctx.Err() == nil {
			if l := strings.TrimSpace(logs.String()); l != "" {
				fmt.Fprintf(s.e.stderr, "worker log:\n%s\n", tail(l, 20))
			}
		}
	}()
	admin, err := inbox.NewAdmin(s.pool, inbox.AdminConfig{Logger: discardLogger})
	if err != nil {
		return err
	}
	view := admin.ForTenant(s.tenant)

	orders := demoOrders()
	deliveries := demoDeliveries(orders)
	out.printf("\n1. A broker delivers %s at least once to tenant(%s); a worker is running.\n", count(len(deliveries), "order event", "order events"), s.tenant)
	var accepted, duplicates, conflicts int
	var acceptedLive atomic.Int64
	stopWatch := s.startWatch(ctx, view, &acceptedLive)
	defer stopWatch()
	for _, d := range deliveries {
		msg := s.message(d.order)
		res, err := client.Accept(ctx, msg)
		action := inbox.ActionFor(err)
		var outcome string
		switch {
		case err == nil && res.Outcome == inbox.Accepted:
			accepted++
			acceptedLive.Add(1)
			outcome = "accepted"
		case err == nil:
			duplicates++
			outcome = fmt.Sprintf("duplicate (%s)", res.Status)
		case errors.Is(err, inbox.ErrIdentityConflict):
			conflicts++
			outcome = inbox.CodeIdentityConflict
		default:
			return fmt.Errorf("accepting %s: %w", msg.MessageID, err)
		}
		note := fmt.Sprintf("%s  %-8s %7.2f %s", d.order.OrderID, d.order.Customer, d.order.Total, d.order.Currency)
		if d.note != "" {
			note = d.note
		}
		out.printf("  deliver  %-8s  %-42s  %-21s -> %s\n", msg.MessageID, note, outcome, action)
		// A stream, not a batch: the worker keeps up live.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(60 * time.Millisecond):
		}
	}

	stopWatch()
	out.printf("\n2. Waiting for the worker to drain the inbox (its retries back off 200ms, 400ms, 800ms, ...):\n")
	st, err := s.waitDrained(ctx, view, int64(accepted), 30*time.Second)
	if err != nil {
		return err
	}

	out.printf("\n3. Stats for tenant(%s) (`inbox stats --tenant %s --completed`):\n", s.tenant, s.tenant)
	if err := s.render(func(w io.Writer) error { return renderStats(w, st, 0) }); err != nil {
		return err
	}
	dead, err := view.List(ctx, inbox.ListParams{Statuses: []inbox.Status{inbox.StatusDead}})
	if err != nil {
		return err
	}
	if len(dead.Receipts) != 1 {
		return fmt.Errorf("expected exactly one DEAD receipt, found %d", len(dead.Receipts))
	}
	deadID := dead.Receipts[0].ID
	r, err := view.Get(ctx, deadID)
	if err != nil {
		return err
	}
	out.printf("\n4. The DEAD receipt (`inbox show %s`):\n", deadID)
	if err := s.render(func(w io.Writer) error { return renderReceipt(w, r, time.Now()) }); err != nil {
		return err
	}

	out.printf("\n5. A fix for currency XXX is deployed; an operator requeues the receipt:\n")
	reason := "currency XXX supported since the handler fix"
	out.printf("  $ inbox requeue %s --tenant %s --version %d --reason %q --actor demo\n", deadID, s.tenant, r.Version, reason)
	s.fixed.Store(true)
	rq, err := view.Requeue(ctx, deadID, inbox.ChangeParams{ExpectedVersion: r.Version, Actor: "demo", Reason: reason})
	if err != nil {
		return err
	}
	out.printf("  requeued %s: %s -> PENDING, version %d -> %d (audit #%d)\n", rq.ID, rq.FromStatus, rq.FromVersion, rq.Version, rq.AuditID)
	r, err = s.waitCompleted(ctx, view, deadID, 10*time.Second)
	if err != nil {
		return err
	}
	out.printf("\n6. The requeued receipt completed (`inbox show %s`):\n", deadID)
	if err := s.render(func(w io.Writer) error { return renderReceipt(w, r, time.Now()) }); err != nil {
		return err
	}

	final, err := view.Stats(ctx, inbox.StatsParams{IncludeCompleted: true})
	if err != nil {
		return err
	}
	var completed, deadLeft int64
	for _, c := range final.Consumers {
		completed += c.Completed
		deadLeft += c.Dead
	}
	var rows, distinct int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT order_id) FROM pginbox_demo_orders WHERE tenant_id = $1`, s.tenant).
		Scan(&rows, &distinct); err != nil {
		return err
	}

	out.printf("\nSummary\n")
	out.printf("  deliveries: %d (%d accepted, %s, %s)\n", len(deliveries), accepted,
		count(duplicates, "duplicate", "duplicates"), count(conflicts, "conflict", "conflicts"))
	out.printf("  handler: %s, %s retried, %s fixed by requeue\n", count(s.attempts.Load(), "attempt", "attempts"),
		count(s.transient.Load(), "transient failure", "transient failures"), count(s.permanent.Load(), "permanent failure", "permanent failures"))
	out.printf("  receipts: %d of %d COMPLETED, %d DEAD\n", completed, accepted, deadLeft)
	out.printf("  projection: %s for %s in pginbox_demo_orders (one per order)\n", count(rows, "row", "rows"), count(distinct, "order", "orders"))
	if completed != int64(accepted) || deadLeft != 0 || rows != int64(len(orders)) || distinct != rows {
		return fmt.Errorf("the demo ended in an unexpected state: %d completed, %d dead, %d rows", completed, deadLeft, rows)
	}
	if s.external {
		out.printf("  left in your database: table pginbox_demo_orders and the receipts of tenant(%s)\n", s.tenant)
	}
	return nil
}

// render prints what fn writes, indented, through the console.
func (s *demoScenario) render(fn func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := fn(&buf); err != nil {
		return err
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line != "" {
			b.WriteString("  " + line)
		}
	}
	s.out.printf("%s", b.String())
	return nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// progress reads the stats and updates the live line; it reports whether every
// accepted receipt is COMPLETED or DEAD.
func (s *demoScenario) progress(ctx context.Context, view *inbox.AdminView, accepted int64) (*inbox.Stats, bool, error) {
	st, err := view.Stats(ctx, inbox.StatsParams{IncludeCompleted: true})
	if err != nil {
		return nil, false, err
	}
	var c inbox.ConsumerStats
	for _, cs := range st.Consumers {
		c = cs
	}
	line := fmt.Sprintf("  progress: %d/%d completed, %d pending, %d processing, %d retrying, %d dead",
		c.Completed, accepted, c.Pending, c.Processing, c.Retryable, c.Dead)
	// The backlog age changes all the time: worth redrawing, not a log line each.
	if s.e.tty && c.Due > 0 {
		line += ", backlog age " + fmtAge(c.OldestDueAge)
	}
	s.out.set(line)
	return st, c.Pending+c.Processing+c.Retryable == 0 && c.Completed+c.Dead == accepted, nil
}

// startWatch keeps the live line current while the deliveries go on, until
// the returned function is called. Terminals only: in a log, progress lines
// between the deliveries would be noise.
func (s *demoScenario) startWatch(ctx context.Context, view *inbox.AdminView, accepted *atomic.Int64) (stop func()) {
	if !s.e.tty {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				s.progress(ctx, view, accepted.Load())
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// waitDrained shows the live progress line until every accepted receipt is
// COMPLETED or DEAD, and returns the final stats.
func (s *demoScenario) waitDrained(ctx context.Context, view *inbox.AdminView, accepted int64, limit time.Duration) (*inbox.Stats, error) {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	defer s.out.done()
	for {
		st, drained, err := s.progress(ctx, view, accepted)
		if err != nil {
			return nil, err
		}
		if drained {
			return st, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the worker did not drain the inbox within %s", limit)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

func (s *demoScenario) waitCompleted(ctx context.Context, view *inbox.AdminView, id inbox.ID, limit time.Duration) (*inbox.ReceiptDetails, error) {
	deadline := time.Now().Add(limit)
	for {
		r, err := view.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if r.Status == inbox.StatusCompleted || r.Status == inbox.StatusDead {
			return r, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("receipt %s still %s after %s", id, r.Status, limit)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
