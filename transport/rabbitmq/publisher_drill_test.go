package rabbitmq_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
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
