//go:build unix

package kafka_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/relaytest"
	"github.com/pginbox/pginbox/transport/kafka"
)

const envCrashBrokers = "PGINBOX_KAFKA_CHILD_BROKERS"

func TestPublisherCrashChild(t *testing.T) {
	dsn := relaytest.ChildDSN()
	if dsn == "" {
		t.Skip("only runs as a child process of TestPublisherCrashAfterPublishBeforeMark")
	}
	p, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: strings.Split(os.Getenv(envCrashBrokers), ",")})
	must(t, err)
	relaytest.RunChild(t, dsn, p)
}

// A relay SIGKILLed after the cluster acknowledged a batch and before it
// marked the events: the next relay (a new producer, so Kafka's idempotence
// does not span the two) writes them again with the same event ID header,
// and the receiving inbox stores and applies each event once.
func TestPublisherCrashAfterPublishBeforeMark(t *testing.T) {
	t.Parallel()
	r := newRig(t, 3)
	dsn := testDSN(t)
	pool := relaytest.Pool(t, dsn)
	const n = 40
	e := relaytest.Emit(t, pool, topic, n)
	unmarked := relaytest.Crash(t, pool, dsn, "TestPublisherCrashChild", newPublisher(t, r), envCrashBrokers+"="+strings.Join(r.addrs, ","))
	if unmarked == 0 {
		t.Fatal("the child published nothing before the crash point")
	}
	if got := relaytest.Published(t, pool); got != n {
		t.Fatalf("%d events PUBLISHED after the takeover, want %d", got, n)
	}
	if recs := r.readAll(t, n+unmarked); len(recs) != n+unmarked {
		t.Fatalf("topic holds %d records, want %d: %d events plus the %d published twice", len(recs), n+unmarked, n, unmarked)
	}
	dbPool := drill.Pool(t, testDSN(t), nil)
	ledger := drill.NewLedger(t, dbPool, testConsumer)
	cfg := r.config(t)
	cfg.Decode = kafka.DecodeEvent(testConsumer)
	c, err := kafka.NewConsumer(newClient(t, dbPool), cfg)
	must(t, err)
	stop := run(t, c)
	drill.Eventually(t, 30*time.Second, "every record accepted", func() bool { return c.Stats().Acked == int64(n+unmarked) })
	stop()
	t.Logf("kafka publisher crash: sent=%d published=%d (of which %d twice) received=%d stored=%d",
		n, n+unmarked, unmarked, c.Stats().Acked, ledger.Receipts(t))
	ledger.Report(t, "kafka publisher crash", e.IDs, c.Stats().Acked)
}
