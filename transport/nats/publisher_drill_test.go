package nats_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
)

// Publish returns when its context ends, even when the server stopped
// answering: the relay's PublishTimeout holds.
func TestPublisherHonoursContext(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	proxy, err := faultproxy.New("tcp", strings.TrimPrefix(url, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	e := newEnv(t, url, false)
	p := newPublisher(t, "nats://"+proxy.Addr())
	if errs := p.Publish(context.Background(), []outbox.Message{outMessage(e.subject, `{"n":1}`)}); errs != nil {
		t.Fatalf("first publish: %v", errs)
	}
	proxy.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	errs := p.Publish(ctx, []outbox.Message{outMessage(e.subject, `{"n":2}`)})
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Publish took %v after a 500ms context", took)
	}
	if len(errs) != 1 || !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Fatalf("errors %v: want the context's deadline", errs)
	}
	proxy.Cut()
	proxy.Resume()
	drill.Eventually(t, 10*time.Second, "a publish after the fault", func() bool {
		return p.Publish(context.Background(), []outbox.Message{outMessage(e.subject, `{"n":3}`)}) == nil
	})
}
