package rabbitmq_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/relaytest"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/rabbitmq"
)

// proxied is the rig's broker URL through a fault proxy.
func (r *rig) proxied(t testing.TB) (*faultproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(r.url)
	must(t, err)
	proxy, err := faultproxy.New("tcp", u.Host)
	must(t, err)
	t.Cleanup(func() { proxy.Close() })
	u.Host = proxy.Addr()
	return proxy, u.String()
}

// The publisher's connection is cut twice while the relay streams events,
// once with reconnects refused for a while (relaytest.CutDrill): the publisher reconnects and
// every event reaches the queue, none lost (a message whose confirm the cut
// swallowed is sent again: a duplicate the receiving inbox drops).
func TestPublisherDrillConnectionCut(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	proxy, via := r.proxied(t)
	pool := relaytest.Pool(t, testDSN(t))
	p := newPublisher(t, via, rabbitmq.PublisherConfig{Logger: testlog.Errors(t)})
	relay := relaytest.Relay(t, pool, p, testlog.Errors(t))

	// The receiving side: the transport's consumer into an inbox.
	dbPool := drill.Pool(t, testDSN(t), nil)
	ledger := drill.NewLedger(t, dbPool, testConsumer)
	cfg := r.config(t, r.url)
	cfg.Decode = rabbitmq.DecodeEvent(testConsumer)
	c, err := rabbitmq.NewConsumer(newClient(t, dbPool), cfg)
	must(t, err)
	stopConsumer := run(t, c)
	stopRelay := drill.Run(t, relay.Run)

	e := relaytest.CutDrill(t, pool, proxy, r.queue)
	n := len(e.IDs)
	stopRelay()
	drill.Eventually(t, 60*time.Second, "every event stored", func() bool { return ledger.Receipts(t) == n })
	drill.Eventually(t, 30*time.Second, "an empty queue", func() bool { return r.depth(t, r.queue) == 0 })
	stopConsumer()
	if p.Connects() < 3 {
		t.Fatalf("%d connects, want at least 3 (two cuts)", p.Connects())
	}
	t.Logf("rabbitmq publisher connection-cut: sent=%d published=%d connects=%d received=%d (acked by the consumer)",
		n, relaytest.Published(t, pool), p.Connects(), c.Stats().Acked)
	ledger.Report(t, "rabbitmq publisher connection-cut", e.IDs, c.Stats().Acked)
}

// Publish returns when its context ends, even when the broker stopped
// answering: the relay's PublishTimeout holds.
func TestPublisherHonoursContext(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	proxy, via := r.proxied(t)
	p := newPublisher(t, via, rabbitmq.PublisherConfig{})
	if errs := p.Publish(context.Background(), []outbox.Message{message(r.queue, `{"n":1}`)}); errs != nil {
		t.Fatalf("first publish: %v", errs)
	}
	proxy.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	errs := p.Publish(ctx, []outbox.Message{message(r.queue, `{"n":2}`)})
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Publish took %v after a 500ms context", took)
	}
	if len(errs) != 1 || errs[0] == nil {
		t.Fatalf("errors %v: want one (no confirm)", errs)
	}
	t.Logf("blackholed publish returned %q", errs[0])
	proxy.Cut()
	proxy.Resume()
	// The first attempt may still find the cut connection (as a relay's
	// retry would); the publisher then reconnects.
	drill.Eventually(t, 10*time.Second, "a publish after the fault", func() bool {
		return p.Publish(context.Background(), []outbox.Message{message(r.queue, `{"n":3}`)}) == nil
	})
}
