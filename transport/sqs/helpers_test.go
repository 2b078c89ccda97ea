package sqs_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	pgsqs "github.com/pginbox/pginbox/transport/sqs"
)

const testTenant = "acme"

// config is a consumer configuration for queue url with fast retries.
func config(c *sqs.Client, url, dlq string, t testing.TB) pgsqs.Config {
	return pgsqs.Config{
		Client:             c,
		QueueURL:           url,
		DeadLetterQueueURL: dlq,
		Scope:              inbox.Tenant(testTenant),
		Decode:             decodeOrder,
		VisibilityTimeout:  4 * time.Second,
		WaitTime:           time.Second,
		RetryDelay:         time.Second,
		MaxRetryDelay:      time.Second,
		Logger:             testlog.Errors(t),
	}
}

// decodeOrder takes the body as an order.created payload.
func decodeOrder(m types.Message) (inbox.Message, error) {
	return inbox.Message{
		Identity:      inbox.Identity{Source: "shop", Consumer: "orders.projection.v1"},
		EventType:     "order.created",
		SchemaVersion: 1,
		Payload:       []byte(aws.ToString(m.Body)),
	}, nil
}

// start creates a Consumer for cfg and runs it until the test ends (or
// stop is called); Run must return nil.
func start(t testing.TB, acc pgsqs.Accepter, cfg pgsqs.Config) (stop func()) {
	t.Helper()
	c, err := pgsqs.NewConsumer(acc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return drill.Run(t, c.Run)
}

// newClient is an inbox client on pool.
func newClient(t testing.TB, pool *pgxpool.Pool) *inbox.Client {
	t.Helper()
	c, err := inbox.NewClient(pool, inbox.Config{Logger: testlog.Errors(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// receipts counts the stored receipts.
func receipts(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts_live`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// watched wraps an Accepter: before and after every accept it runs check,
// and it counts accepts and their failures.
type watched struct {
	acc      pgsqs.Accepter
	check    func(when string)
	calls    atomic.Int64
	failures atomic.Int64
	mu       sync.Mutex
	ids      []string
}

func (w *watched) Accept(ctx context.Context, m inbox.Message) (inbox.AcceptResult, error) {
	w.calls.Add(1)
	w.mu.Lock()
	w.ids = append(w.ids, m.MessageID)
	w.mu.Unlock()
	if w.check != nil {
		w.check("before accept")
	}
	res, err := w.acc.Accept(ctx, m)
	if err != nil {
		w.failures.Add(1)
	}
	if w.check != nil {
		w.check("after accept")
	}
	return res, err
}
