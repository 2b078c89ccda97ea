//go:build unix

package rabbitmq_test

import (
	"os"
	"testing"
	"time"

	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/relaytest"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

const envCrashURL = "PGINBOX_RABBITMQ_CHILD_URL"

func TestPublisherCrashChild(t *testing.T) {
	dsn := relaytest.ChildDSN()
	if dsn == "" {
		t.Skip("only runs as a child process of TestPublisherCrashAfterPublishBeforeMark")
	}
	relaytest.RunChild(t, dsn, newPublisher(t, os.Getenv(envCrashURL), rabbitmq.PublisherConfig{}))
}

// A relay SIGKILLed after the broker confirmed a batch and before it marked
// the events: the next relay publishes them again with the same message-id,
// the queue holds both copies (RabbitMQ does not deduplicate), and the
// receiving inbox stores and applies each event once.
func TestPublisherCrashAfterPublishBeforeMark(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dsn := testDSN(t)
	pool := relaytest.Pool(t, dsn)
	const n = 40
	e := relaytest.Emit(t, pool, r.queue, n)
	unmarked := relaytest.Crash(t, pool, dsn, "TestPublisherCrashChild", newPublisher(t, r.url, rabbitmq.PublisherConfig{}), envCrashURL+"="+r.url)
	if unmarked == 0 {
		t.Fatal("the child published nothing before the crash point")
	}
	if got := relaytest.Published(t, pool); got != n {
		t.Fatalf("%d events PUBLISHED after the takeover, want %d", got, n)
	}
	if d := r.depth(t, r.queue); d != n+unmarked {
		t.Fatalf("queue holds %d messages, want %d: %d events plus the %d published twice", d, n+unmarked, n, unmarked)
	}
	dbPool := drill.Pool(t, testDSN(t), nil)
	ledger := drill.NewLedger(t, dbPool, testConsumer)
	cfg := r.config(t, r.url)
	cfg.Decode = rabbitmq.DecodeEvent(testConsumer)
	c, err := rabbitmq.NewConsumer(newClient(t, dbPool), cfg)
	must(t, err)
	stop := run(t, c)
	drill.Eventually(t, 30*time.Second, "every copy acked", func() bool { return c.Stats().Acked == int64(n+unmarked) })
	stop()
	t.Logf("rabbitmq publisher crash: sent=%d published=%d (of which %d twice) received=%d stored=%d",
		n, n+unmarked, unmarked, c.Stats().Acked, ledger.Receipts(t))
	ledger.Report(t, "rabbitmq publisher crash", e.IDs, c.Stats().Acked)
}
