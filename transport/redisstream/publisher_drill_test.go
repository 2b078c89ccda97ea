package redisstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
)

// Publish returns when its context ends, even when Redis stopped answering:
// the relay's PublishTimeout holds.
func TestPublisherHonoursContext(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	proxy, err := faultproxy.New("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	e := newEnv(t, addr)
	p := newPublisher(t, newRedis(t, proxy.Addr()))
	msg := func() outbox.Message {
		return outbox.Message{ID: inboxtype.New(), Source: testSource, Destination: e.stream, EventType: "order.confirmed", SchemaVersion: 1, Payload: []byte(`{}`)}
	}
	if errs := p.Publish(context.Background(), []outbox.Message{msg()}); errs != nil {
		t.Fatalf("first publish: %v", errs)
	}
	proxy.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	errs := p.Publish(ctx, []outbox.Message{msg()})
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Publish took %v after a 500ms context", took)
	}
	if len(errs) != 1 || !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Fatalf("errors %v: want the context's deadline", errs)
	}
	proxy.Cut()
	proxy.Resume()
	drill.Eventually(t, 10*time.Second, "a publish after the fault", func() bool {
		return p.Publish(context.Background(), []outbox.Message{msg()}) == nil
	})
}
