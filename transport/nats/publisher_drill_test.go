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
	"github.com/pginbox/pginbox/transport/internal/relaytest"
	"github.com/pginbox/pginbox/transport/internal/testlog"
)

// The publisher's connection is cut twice while the relay streams events,
// once with reconnects refused for a while (relaytest.CutDrill): the client reconnects, every
// event is in the stream, and a publish whose PubAck the cut swallowed is
// retried and dropped by the stream's duplicate window (no copy twice).
func TestPublisherDrillConnectionCut(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	proxy, err := faultproxy.New("tcp", strings.TrimPrefix(url, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	e := newEnv(t, url, false)
	pool := relaytest.Pool(t, testDSN(t))
	p := newPublisher(t, "nats://"+proxy.Addr())
	stop := drill.Run(t, relaytest.Relay(t, pool, p, testlog.Errors(t)).Run)
	ev := relaytest.CutDrill(t, pool, proxy, e.subject)
	stop()
	n := len(ev.IDs)
	t.Logf("nats publisher connection-cut: %d duplicate PubAcks", p.Duplicates())
	received(t, ev, e.streamMsgs(t, n)).Report(t, "nats publisher connection-cut", ev, relaytest.Published(t, pool), false)
}

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
