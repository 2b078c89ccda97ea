package rabbitmq_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

// publishAll sends n messages with distinct IDs and returns the IDs.
func (r *rig) publishAll(t *testing.T, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s-%04d", prefix, i)
		r.publish(t, ids[i], fmt.Sprintf(`{"n":%d}`, i))
	}
	return ids
}

// The broker connection goes away in the middle of a stream, twice by a cut
// and once by a refusal while reconnecting: the consumer reconnects, nothing
// is lost and nothing is applied twice.
func TestDrillConnectionCut(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	u, err := url.Parse(r.url)
	must(t, err)
	proxy, err := faultproxy.New("tcp", u.Host)
	must(t, err)
	t.Cleanup(func() { proxy.Close() })
	u.Host = proxy.Addr()

	pool := drill.Pool(t, testDSN(t), nil)
	ledger := drill.NewLedger(t, pool, testConsumer)
	const n = 300
	sent := r.publishAll(t, "cut", n)
	cfg := r.config(t, u.String())
	cfg.Concurrency, cfg.Prefetch = 4, 8
	c, err := rabbitmq.NewConsumer(newClient(t, pool), cfg)
	must(t, err)
	stop := run(t, c)

	drill.Eventually(t, 30*time.Second, "60 acks", func() bool { return c.Stats().Acked >= 60 })
	drill.Cut(t, proxy)
	drill.Eventually(t, 30*time.Second, "a reconnect and 150 acks", func() bool { return c.Stats().Connects >= 2 && c.Stats().Acked >= 150 })
	before := proxy.Accepted()
	drill.Down(t, proxy)
	drill.Eventually(t, 30*time.Second, "two refused reconnects", func() bool { return proxy.Accepted() >= before+2 })
	proxy.Resume()
	drill.Eventually(t, 60*time.Second, "every message stored", func() bool { return ledger.Receipts(t) == n })
	drill.Eventually(t, 30*time.Second, "an empty queue", func() bool { return r.depth(t, r.queue) == 0 })
	stop()
	if d := r.depth(t, r.queue); d != 0 {
		t.Fatalf("%d messages back in the queue after stop: some were never acked", d)
	}
	if s := c.Stats(); s.Connects < 3 || s.DeadLettered != 0 {
		t.Fatalf("stats %+v: want at least 3 connects and no dead letters", s)
	}
	ledger.Report(t, "rabbitmq connection-cut", sent, c.Stats().Acked)
}

// PostgreSQL is unreachable for a while: the consumer does not ack, the
// broker redelivers, and once the database is back every message is applied
// exactly once.
func TestDrillDatabaseOutage(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dsn := testDSN(t)
	proxy, pool := drill.ProxiedPool(t, dsn)
	direct := drill.Pool(t, dsn, nil)
	ledger := drill.NewLedger(t, direct, testConsumer)
	const n = 200
	sent := r.publishAll(t, "outage", n)
	cfg := r.config(t, r.url)
	cfg.DeliveryLimit = 1000 // this drill is about redelivery, not the limit
	c, err := rabbitmq.NewConsumer(newClient(t, pool), cfg)
	must(t, err)
	stop := run(t, c)

	drill.Eventually(t, 30*time.Second, "50 receipts", func() bool { return ledger.Receipts(t) >= 50 })
	proxy.Refuse() // the server is down: new connections fail,
	proxy.Cut()    // open ones break, some in the middle of a commit
	drill.Eventually(t, 30*time.Second, "20 requeues", func() bool { return c.Stats().Requeued >= 20 })
	stored := ledger.Receipts(t)
	acked := c.Stats().Acked
	proxy.Resume()
	drill.Eventually(t, 60*time.Second, "every message stored", func() bool { return ledger.Receipts(t) == n })
	drill.Eventually(t, 30*time.Second, "an empty queue", func() bool { return r.depth(t, r.queue) == 0 })
	stop()
	if d := r.depth(t, r.queue); d != 0 {
		t.Fatalf("%d messages back in the queue after stop", d)
	}
	if stored == n || acked == n {
		t.Fatalf("the outage hit nothing: %d stored, %d acked before the database came back", stored, acked)
	}
	if dead := r.dead(t); len(dead) != 0 {
		t.Fatalf("%d dead letters, want none", len(dead))
	}
	t.Logf("outage: %d stored and %d acked before recovery, %d requeues", stored, acked, c.Stats().Requeued)
	ledger.Report(t, "rabbitmq database-outage", sent, c.Stats().Acked)
}
