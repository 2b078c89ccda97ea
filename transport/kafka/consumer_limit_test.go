package kafka_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/kafka"
)

// poisoned fails every batch holding message ID poison, as a failed
// transaction would, and counts the batches that held it alone.
type poisoned struct {
	kafka.Accepter
	poison string

	mu    sync.Mutex
	alone int
}

func (p *poisoned) AcceptBatch(ctx context.Context, msgs []inbox.Message) ([]inbox.BatchItem, error) {
	for _, m := range msgs {
		if m.MessageID == p.poison {
			p.mu.Lock()
			if len(msgs) == 1 {
				p.alone++
			}
			p.mu.Unlock()
			return nil, errors.New("storage failure")
		}
	}
	return p.Accepter.AcceptBatch(ctx, msgs)
}

// A record whose accept always fails, in the middle of a batch, is found by
// accepting one record at a time, dead-lettered (reason delivery_limit)
// after DeliveryLimit failed accepts of its own, and the partition moves on:
// only it is dead-lettered, every other record is stored.
func TestDeliveryLimitDeadLettersPoison(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	pool := drill.Pool(t, testDSN(t), nil)
	for _, id := range []string{"evt-0", "evt-1", "poison", "evt-3", "evt-4"} {
		r.produce(t, 0, id, `{"n":1}`)
	}
	acc := &poisoned{Accepter: newClient(t, pool), poison: "poison"}
	cfg := r.config(t)
	cfg.DeliveryLimit = 3
	c, err := kafka.NewConsumer(acc, cfg)
	must(t, err)
	stop := run(t, c)
	drill.Eventually(t, 30*time.Second, "every offset committed", func() bool { return r.committedAll(t) })
	stop()

	dead := r.dead(t, 1)[0]
	if header(dead, idHeader) != "poison" || header(dead, "pginbox-reason") != kafka.ReasonDeliveryLimit ||
		!strings.Contains(header(dead, "pginbox-error"), "not accepted after 3 deliveries (DeliveryLimit); last error: storage failure") {
		t.Fatalf("dead letter %s %v, want poison with reason %s", dead.Value, dead.Headers, kafka.ReasonDeliveryLimit)
	}
	if acc.alone != 3 {
		t.Errorf("the poison record was accepted alone %d times, want DeliveryLimit (3)", acc.alone)
	}
	if s := c.Stats(); s.DeadLettered != 1 || s.Acked != 4 {
		t.Errorf("stats %+v, want 1 dead-lettered and 4 acked", s)
	}
	var n int
	must(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_receipts_live").Scan(&n))
	if n != 4 {
		t.Errorf("%d receipts, want 4 (all but the poison)", n)
	}
}
