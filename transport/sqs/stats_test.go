package sqs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox"

	"github.com/pginbox/pginbox/transport/internal/drill"
	pgsqs "github.com/pginbox/pginbox/transport/sqs"
)

// Stats counts deletes after an accept, dead letters and retries (the
// first accept fails).
func TestStats(t *testing.T) {
	t.Parallel()
	c := client(t)
	pool := newPool(t)
	url := createQueue(t, c, "stats-"+randomID(), nil)
	dlq := createQueue(t, c, "stats-dead-"+randomID(), nil)
	cons, err := pgsqs.NewConsumer(&failFirst{Accepter: newClient(t, pool)}, config(c, url, dlq, t))
	if err != nil {
		t.Fatal(err)
	}
	drill.Run(t, cons.Run)
	send(t, c, url, "evt-1", `{"orderId":"o-1"}`)
	send(t, c, url, "evt-2", `{"orderId":`) // invalid JSON: dead-lettered
	drill.Eventually(t, 20*time.Second, "one accepted, one dead-lettered, one retry", func() bool {
		s := cons.Stats()
		return s.Acked == 1 && s.DeadLettered == 1 && s.Retries == 1
	})
}

// failFirst fails the first accept as a database outage would.
type failFirst struct {
	pgsqs.Accepter
	failed atomic.Bool
}

func (f *failFirst) Accept(ctx context.Context, m inbox.Message) (inbox.AcceptResult, error) {
	if !f.failed.Swap(true) {
		return inbox.AcceptResult{}, errors.New("the database is down")
	}
	return f.Accepter.Accept(ctx, m)
}
