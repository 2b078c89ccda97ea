package rabbitmq_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

// The queue is deleted under a consumer that has consumed from it: the
// consumer reports ErrQueueLost to OnError and counts it in Stats, instead
// of waiting forever on a consumer the broker cancelled, and consumes again
// once the queue is declared again.
func TestQueueLostIsReported(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	pool := drill.Pool(t, testDSN(t), nil)
	var mu sync.Mutex
	var reported []error
	cfg := r.config(t, r.url)
	log, logs := testlog.Capture()
	cfg.Logger = log
	cfg.OnError = func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}
	c, err := rabbitmq.NewConsumer(newClient(t, pool), cfg)
	must(t, err)
	run(t, c)

	r.publish(t, "evt-1", `{"n":1}`)
	drill.Eventually(t, 20*time.Second, "the first message acked", func() bool { return c.Stats().Acked == 1 })
	ch, err := r.conn.Channel()
	must(t, err)
	t.Cleanup(func() { _ = ch.Close() })
	_, err = ch.QueueDelete(r.queue, false, false, false)
	must(t, err)
	drill.Eventually(t, 30*time.Second, "ErrQueueLost reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reported) > 0
	})
	mu.Lock()
	first := reported[0]
	mu.Unlock()
	if !errors.Is(first, rabbitmq.ErrQueueLost) {
		t.Fatalf("reported %v, want ErrQueueLost", first)
	}
	if n := c.Stats().QueuesLost; n != 1 {
		t.Fatalf("Stats().QueuesLost = %d, want 1 (one loss, however many reconnects)", n)
	}
	// A few reconnects to the missing queue (each logs a warning).
	const reconnecting = "connection lost, reconnecting"
	from := strings.Count(logs.String(), reconnecting)
	testkit.Eventually(t, 30*time.Second, func() bool { return strings.Count(logs.String(), reconnecting) >= from+3 },
		"three more reconnects to the missing queue")
	if n := c.Stats().QueuesLost; n != 1 {
		t.Fatalf("Stats().QueuesLost = %d after reconnects, want 1", n)
	}

	_, err = ch.QueueDeclare(r.queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	must(t, err)
	r.publish(t, "evt-2", `{"n":2}`)
	drill.Eventually(t, 30*time.Second, "the message after the queue came back acked", func() bool { return c.Stats().Acked == 2 })
}
