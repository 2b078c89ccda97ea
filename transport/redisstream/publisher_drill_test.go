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
	"github.com/pginbox/pginbox/transport/internal/relaytest"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/redisstream"
)

// The publisher's connection is cut twice while the relay streams events,
// once with reconnects refused for a while (relaytest.CutDrill): every event is in the stream,
// and the receiving inbox applies each once (Redis keeps a copy the cut
// made the relay send twice; the inbox drops it).
func TestPublisherDrillConnectionCut(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	proxy, err := faultproxy.New("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	e := newEnv(t, addr)
	pool := relaytest.Pool(t, testDSN(t))
	stopRelay := drill.Run(t, relaytest.Relay(t, pool, newPublisher(t, newRedis(t, proxy.Addr())), testlog.Errors(t)).Run)
	ev := relaytest.CutDrill(t, pool, proxy, e.stream)
	stopRelay()
	entries := len(e.entries(t))
	receive(t, e, ev, entries, "redis publisher connection-cut")
}

// receive consumes the stream into a fresh inbox with a Consumer and reports
// the drill: every event applied once, however many entries carry it.
func receive(t *testing.T, e *env, ev relaytest.Emitted, entries int, name string) {
	t.Helper()
	dbPool := newPool(t)
	ledger := drill.NewLedger(t, dbPool, testConsumer)
	cfg := e.config(e.rdb, testlog.Errors(t))
	cfg.Decode = redisstream.DecodeEvent(testConsumer)
	stop := start(t, newClient(t, dbPool), cfg)
	drill.Eventually(t, 60*time.Second, "every event stored", func() bool { return ledger.Receipts(t) == len(ev.IDs) })
	drill.Eventually(t, 30*time.Second, "every entry acknowledged", func() bool { return e.unsettled(t) == 0 })
	stop()
	t.Logf("%s: sent=%d entries=%d (Redis keeps every copy) stored=%d", name, len(ev.IDs), entries, ledger.Receipts(t))
	ledger.Report(t, name, ev.IDs, int64(entries))
}

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
