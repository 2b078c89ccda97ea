package inbox_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

const businessTable = `CREATE TABLE order_projection (
	tenant_id text NOT NULL,
	order_id  text NOT NULL,
	PRIMARY KEY (tenant_id, order_id)
)`

type orderCreated struct {
	OrderID string `json:"orderId"`
}

func (o orderCreated) Validate() error {
	if o.OrderID == "" {
		return errors.New("orderId is required")
	}
	return nil
}

// projectOrder is the business write every handler test uses.
func projectOrder(ctx context.Context, m *handler.Msg, p orderCreated) error {
	_, err := m.Tx.Exec(ctx, "INSERT INTO order_projection (tenant_id, order_id) VALUES ($1, $2)", m.Scope.ID, p.OrderID)
	return err
}

func setupBusiness(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), businessTable); err != nil {
		t.Fatal(err)
	}
}

func businessRows(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM order_projection").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func registry(t testing.TB, fn handler.Func) *handler.Registry {
	t.Helper()
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: "orders.projection.v1", EventType: "order.created", SchemaVersion: 1}, fn); err != nil {
		t.Fatal(err)
	}
	return reg
}

func newWorker(t testing.TB, pool *pgxpool.Pool, reg *handler.Registry, cfg inbox.WorkerConfig) *inbox.Worker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	w, err := inbox.NewWorker(pool, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

type receiptState struct {
	Status      string
	Attempts    int
	LastError   *string
	AvailableAt time.Time
	Now         time.Time
	Version     int64
}

func stateOf(t testing.TB, pool *pgxpool.Pool, id inbox.ID) receiptState {
	t.Helper()
	var s receiptState
	err := pool.QueryRow(context.Background(),
		"SELECT status, attempts, last_error, available_at, now(), version FROM pginbox_receipts WHERE id = $1", id).
		Scan(&s.Status, &s.Attempts, &s.LastError, &s.AvailableAt, &s.Now, &s.Version)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestHandlerErrorRollsBackBusinessWriteAndCompletion(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	setupBusiness(t, pool)
	c := newClient(t, pool, inbox.Config{})

	var fail atomic.Bool
	fail.Store(true)
	reg := registry(t, handler.Typed(handler.DecodeOptions{}, func(ctx context.Context, m *handler.Msg, p orderCreated) error {
		if err := projectOrder(ctx, m, p); err != nil {
			return err
		}
		if fail.Load() {
			return errors.New("downstream said no")
		}
		return nil
	}))
	w := newWorker(t, pool, reg, inbox.WorkerConfig{})

	res, err := c.Accept(ctx, orderMsg("evt-1", map[string]string{"orderId": "o-1"}))
	is.NoErr(err)
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 1)
	is.Equal(businessRows(t, pool), 0) // rolled back with the completion

	st := stateOf(t, pool, res.ID)
	is.Equal(st.Status, "RETRYABLE")
	is.Equal(st.Attempts, 1)
	is.True(st.LastError != nil && *st.LastError == "downstream said no")
	// First retry: 1s +-20%, persisted.
	delay := st.AvailableAt.Sub(st.Now)
	if delay < 700*time.Millisecond || delay > 1200*time.Millisecond {
		t.Fatalf("retry delay %v outside the backoff window", delay)
	}

	// Not due yet: nothing to drain.
	n, err = w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 0)

	fail.Store(false)
	_, err = pool.Exec(ctx, "UPDATE pginbox_receipts SET available_at = now() WHERE id = $1", res.ID)
	is.NoErr(err)
	n, err = w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 1)
	is.Equal(businessRows(t, pool), 1)
	st = stateOf(t, pool, res.ID)
	is.Equal(st.Status, "COMPLETED")
	is.Equal(st.Attempts, 2)
	is.True(st.LastError == nil)
}

func TestFailuresThatGoDead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := map[string]struct {
		msg     inbox.Message
		handler handler.Func
		tweak   string // SQL run before draining
		want    string // in last_error
	}{
		"permanent error": {
			msg: orderMsg("e", map[string]string{"orderId": "o-1"}),
			handler: func(ctx context.Context, m *handler.Msg) error {
				return handler.Permanent(errors.New("customer deleted"))
			},
			want: "customer deleted",
		},
		"attempts exhausted": {
			msg:     orderMsg("e", map[string]string{"orderId": "o-1"}),
			handler: func(ctx context.Context, m *handler.Msg) error { return errors.New("still failing") },
			tweak:   "UPDATE pginbox_receipts SET attempts = max_attempts - 1",
			want:    "still failing",
		},
		"unknown event type": {
			msg: func() inbox.Message {
				m := orderMsg("e", map[string]string{"orderId": "o-1"})
				m.EventType = "order.cancelled"
				return m
			}(),
			want: "no handler for orders.projection.v1 <- order.cancelled v1",
		},
		"unknown schema version": {
			msg: func() inbox.Message {
				m := orderMsg("e", map[string]string{"orderId": "o-1"})
				m.SchemaVersion = 7
				return m
			}(),
			want: "no handler for orders.projection.v1 <- order.created v7",
		},
		"undecodable payload": {
			msg:  orderMsg("e", map[string]any{"orderId": 42}),
			want: "decoding order.created v1 payload",
		},
		"unknown field": {
			msg:  orderMsg("e", map[string]any{"orderId": "o-1", "surprise": true}),
			want: `unknown field "surprise"`,
		},
		"payload fails validation": {
			msg:  orderMsg("e", map[string]any{"orderId": ""}),
			want: "orderId is required",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			pool, _ := newPool(t)
			setupBusiness(t, pool)
			c := newClient(t, pool, inbox.Config{})
			fn := tc.handler
			if fn == nil {
				fn = handler.Typed(handler.DecodeOptions{}, projectOrder)
			}
			w := newWorker(t, pool, registry(t, fn), inbox.WorkerConfig{})
			res, err := c.Accept(ctx, tc.msg)
			is.NoErr(err)
			if tc.tweak != "" {
				_, err = pool.Exec(ctx, tc.tweak)
				is.NoErr(err)
			}
			_, err = w.Drain(ctx)
			is.NoErr(err)
			st := stateOf(t, pool, res.ID)
			is.Equal(st.Status, "DEAD")
			if st.LastError == nil || !strings.Contains(*st.LastError, tc.want) {
				t.Fatalf("last_error %v does not mention %q", st.LastError, tc.want)
			}
			is.Equal(businessRows(t, pool), 0)
		})
	}
}

func TestHandlerSeesMessageContext(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	var got *handler.Msg
	reg := registry(t, func(ctx context.Context, m *handler.Msg) error {
		cp := *m
		got = &cp
		return nil
	})
	msg := orderMsg("evt-ctx", map[string]string{"orderId": "o-1"})
	msg.Metadata = map[string]string{"correlation-id": "c-1"}
	res, err := c.Accept(ctx, msg)
	is.NoErr(err)
	_, err = newWorker(t, pool, reg, inbox.WorkerConfig{}).Drain(ctx)
	is.NoErr(err)
	is.True(got != nil)
	is.Equal(got.ReceiptID, res.ID)
	is.Equal(got.Scope, inbox.Tenant("tenant-a"))
	is.Equal(got.Source, "orders-service")
	is.Equal(got.MessageID, "evt-ctx")
	is.Equal(got.Attempt, 1)
	is.Equal(got.MaxAttempts, inbox.DefaultMaxAttempts)
	is.Equal(got.Metadata["correlation-id"], "c-1")
	is.Equal(string(got.Payload), `{"orderId":"o-1"}`) // canonical JSON, byte for byte
}

func TestNewWorkerValidatesOwnership(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	reg := registry(t, func(context.Context, *handler.Msg) error { return nil })
	_, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{"orders.projection.v1", "billing.v1"}})
	if err == nil || !strings.Contains(err.Error(), `consumer "billing.v1" is owned by this worker but has no handler`) {
		t.Fatalf("want a missing-handler error, got %v", err)
	}
	dup := reg.Register(handler.Key{Consumer: "orders.projection.v1", EventType: "order.created", SchemaVersion: 1}, func(context.Context, *handler.Msg) error { return nil })
	if !errors.Is(dup, handler.ErrDuplicateHandler) {
		t.Fatalf("want ErrDuplicateHandler, got %v", dup)
	}
	small := poolFor(t, pool.Config().ConnString(), func(c *pgxpool.Config) { c.MaxConns = 5 })
	_, err = inbox.NewWorker(small, reg, inbox.WorkerConfig{Concurrency: 10})
	if err == nil || !strings.Contains(err.Error(), "MaxConns 5 is below Concurrency 10") {
		t.Fatalf("want a pool size error, got %v", err)
	}
}
