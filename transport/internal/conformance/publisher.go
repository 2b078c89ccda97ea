//go:build unix

package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/outbox"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/relaytest"
	"github.com/pginbox/pginbox/transport/internal/testlog"
)

// PublisherDriver adapts one transport's publisher to the suite.
type PublisherDriver interface {
	// SharedAddr is the host:port of the shared test broker (see
	// ConsumerDriver).
	SharedAddr(t *testing.T) string
	// PrivateBroker starts a broker of the test's own with durable
	// settings, for the restart case.
	PrivateBroker(t *testing.T) Broker
	// NewDestination makes a fresh, durable destination on the broker at
	// addr, removed at test end.
	NewDestination(t testing.TB, addr string) Destination
	// NewPublisher is the adapter's publisher connecting to addr (the
	// broker or a fault proxy in front of it), closed at test end. If it
	// has a Connects() int64 method (connections opened), the context case
	// checks it reconnected after the cut.
	NewPublisher(t testing.TB, addr string) outbox.Publisher
	// Deduplicates says whether the broker drops a message published twice
	// with the same event ID (a relay retrying after a lost answer).
	Deduplicates() bool
	// Skip is why case c cannot apply to this broker, or "".
	Skip(c Case) string
}

// Destination is one case's destination on the broker.
type Destination interface {
	// Name is the outbox destination the events are emitted for.
	Name() string
	// Read is every message the destination holds, in order, decoded with
	// the adapter's event decoder; copies included.
	Read(t testing.TB) []Delivered
}

// Delivered is what a published message carries, decoded.
type Delivered struct {
	ID            string            // the event ID
	OrderingKey   string            // the event's ordering key, "" for none
	Source        string            // the emitting service
	EventType     string            // the event's type
	SchemaVersion int               // its schema version
	Metadata      map[string]string // the event's metadata
}

// envChildAddr passes the broker address to the relay-killed child.
const envChildAddr = "PGINBOX_CONFORMANCE_CHILD_ADDR"

// childCase is the subtest the relay-killed case runs in a child process.
const childCase = "relay_killed_child"

// RunPublisher runs every publisher case against d. t must be a top-level
// test: the relay-killed case re-runs it in a child process.
func RunPublisher(t *testing.T, d PublisherDriver) {
	top := t.Name()
	t.Run(childCase, func(t *testing.T) {
		dsn := relaytest.ChildDSN()
		if dsn == "" {
			t.Skip("only runs as the child process of " + string(RelayKilled))
		}
		relaytest.RunChild(t, dsn, d.NewPublisher(t, os.Getenv(envChildAddr)))
	})
	if relaytest.ChildDSN() != "" {
		return
	}
	cases := []struct {
		c  Case
		fn func(*testing.T, PublisherDriver)
	}{
		{RelayEndToEnd, publisherEndToEnd},
		{PublisherCut, publisherCut},
		{RelayKilled, func(t *testing.T, d PublisherDriver) { publisherKilled(t, d, top) }},
		{PublisherRestart, publisherRestart},
		{PublisherContext, publisherContext},
	}
	for _, tc := range cases {
		t.Run(string(tc.c), func(t *testing.T) {
			t.Parallel()
			skip(t, d, tc.c)
			tc.fn(t, d)
		})
	}
}

// report checks what dest holds against what was emitted: every event,
// with its fields, first arrivals in emit order per ordering key, copies
// only where the broker does not deduplicate.
func report(t testing.TB, d PublisherDriver, dest Destination, name string, e relaytest.Emitted, published int, allowDoubles bool) {
	t.Helper()
	var got relaytest.Received
	for _, m := range dest.Read(t) {
		want, ok := e.Keys[m.ID]
		if !ok || m.OrderingKey != want || m.Source != relaytest.Source || m.EventType != relaytest.EventType ||
			m.SchemaVersion != relaytest.Version || m.Metadata[relaytest.MetadataKey] != relaytest.MetadataVal {
			t.Fatalf("message %+v does not carry its event's fields (emitted: %v)", m, ok)
		}
		got.Add(m.ID)
	}
	got.Report(t, name, e, published, allowDoubles && !d.Deduplicates())
}

// Events emitted in transactions reach the broker through a relay, once
// each, with their fields, in emit order per ordering key.
func publisherEndToEnd(t *testing.T, d PublisherDriver) {
	addr := d.SharedAddr(t)
	dest := d.NewDestination(t, addr)
	pool := relaytest.Pool(t, inboxtest.Database(t))
	ev := relaytest.Emit(t, pool, dest.Name(), 100)
	stop := drill.Run(t, relaytest.Relay(t, pool, d.NewPublisher(t, addr), testlog.Errors(t)).Run)
	drill.Eventually(t, 30*time.Second, "every event marked PUBLISHED", func() bool { return relaytest.Published(t, pool) == len(ev.IDs) })
	stop()
	report(t, d, dest, "relay end to end", ev, len(ev.IDs), false)
}

// The publisher's connection is cut twice while a relay streams events,
// once with reconnects refused for a while: every event arrives.
func publisherCut(t *testing.T, d PublisherDriver) {
	addr := d.SharedAddr(t)
	dest := d.NewDestination(t, addr)
	proxy := newProxy(t, addr)
	pool := relaytest.Pool(t, inboxtest.Database(t))
	stop := drill.Run(t, relaytest.Relay(t, pool, d.NewPublisher(t, proxy.Addr()), testlog.Errors(t)).Run)
	ev := relaytest.CutDrill(t, pool, proxy, dest.Name())
	stop()
	report(t, d, dest, "publisher connection cut", ev, relaytest.Published(t, pool), true)
}

// A relay SIGKILLed after its publish and before it marked the events: the
// next relay publishes them again, and nothing is lost.
func publisherKilled(t *testing.T, d PublisherDriver, top string) {
	addr := d.SharedAddr(t)
	dest := d.NewDestination(t, addr)
	dsn := inboxtest.Database(t)
	pool := relaytest.Pool(t, dsn)
	const n = 40
	ev := relaytest.Emit(t, pool, dest.Name(), n)
	// childtest anchors the pattern as ^...$: this names the child subtest.
	unmarked := relaytest.Crash(t, pool, dsn, top+"$/^"+childCase, d.NewPublisher(t, addr), envChildAddr+"="+addr)
	if unmarked == 0 {
		t.Fatal("the child published nothing before the crash point")
	}
	if got := relaytest.Published(t, pool); got != n {
		t.Fatalf("%d events PUBLISHED after the takeover, want %d", got, n)
	}
	if got := len(dest.Read(t)); !d.Deduplicates() && got != n+unmarked {
		t.Fatalf("the destination holds %d messages, want %d: %d events plus the %d published twice", got, n+unmarked, n, unmarked)
	}
	report(t, d, dest, "relay killed before mark", ev, n, true)
}

// The broker process is killed and restarted (a broker of the test's own,
// with durable settings) while a relay publishes: every event the relay
// marked published is still on the broker.
func publisherRestart(t *testing.T, d PublisherDriver) {
	b := d.PrivateBroker(t)
	dest := d.NewDestination(t, b.Addr())
	pool := relaytest.Pool(t, inboxtest.Database(t))
	stop := drill.Run(t, relaytest.Relay(t, pool, d.NewPublisher(t, b.Addr()), testlog.Errors(t)).Run)
	ev := relaytest.Emit(t, pool, dest.Name(), 200)
	drill.Eventually(t, 60*time.Second, "60 events published", func() bool { return relaytest.Published(t, pool) >= 60 })
	b.Restart(t)
	ev.More(t, pool, dest.Name(), 100)
	drill.Eventually(t, 60*time.Second, "every event published after the restart", func() bool { return relaytest.Published(t, pool) == len(ev.IDs) })
	stop()
	report(t, d, dest, "publisher broker restart", ev, len(ev.IDs), true)
}

// contextMessage is the n-th message of the context case, with the fields
// report checks and ordering key key.
func contextMessage(dest string, key string, n int) outbox.Message {
	return outbox.Message{ID: inboxtype.New(), Source: relaytest.Source, Destination: dest, OrderingKey: key,
		EventType: relaytest.EventType, SchemaVersion: relaytest.Version, Payload: []byte(fmt.Sprintf(`{"n":%d}`, n)),
		Metadata: map[string]string{relaytest.MetadataKey: relaytest.MetadataVal}, EmittedAt: time.Now(), Attempt: 1}
}

// The broker stops answering (a blackholed connection, as a partition):
// Publish returns when its context ends (the relay's PublishTimeout), with
// one error per message wrapping the context's; after the fault a Publish
// succeeds again, and what was acknowledged is on the destination. A copy
// of a blackholed message may or may not arrive (sent, or lost with the
// cut connection), so it is only counted.
func publisherContext(t *testing.T, d PublisherDriver) {
	addr := d.SharedAddr(t)
	dest := d.NewDestination(t, addr)
	proxy := newProxy(t, addr)
	p := d.NewPublisher(t, proxy.Addr())
	first := contextMessage(dest.Name(), "order-0", 0)
	if errs := p.Publish(context.Background(), []outbox.Message{first}); errs != nil {
		t.Fatalf("first publish: %v", errs)
	}
	proxy.Blackhole()
	held := []outbox.Message{contextMessage(dest.Name(), "order-1", 1), contextMessage(dest.Name(), "order-2", 2)}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	start := time.Now()
	errs := p.Publish(ctx, held)
	took := time.Since(start)
	cancel()
	if took > 2*time.Second {
		t.Fatalf("Publish took %v after a 500ms context", took)
	}
	if len(errs) != len(held) {
		t.Fatalf("errors %v: want one per message (%d)", errs, len(held))
	}
	for _, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("errors %v: want each to wrap the context's deadline", errs)
		}
	}
	t.Logf("blackholed publish returned after %v: %v", took.Round(time.Millisecond), errs[0])
	proxy.Cut()
	proxy.Resume()
	// The relay retries the same event; an attempt may still find the cut
	// connection before the publisher reconnects.
	last := contextMessage(dest.Name(), "order-0", 3)
	drill.Eventually(t, 10*time.Second, "a publish after the fault", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return p.Publish(ctx, []outbox.Message{last}) == nil
	})
	// A publisher that counts its connections shows the reconnect.
	if c, ok := p.(interface{ Connects() int64 }); ok {
		if c.Connects() < 2 {
			t.Fatalf("%d connects, want a reconnect after the cut", c.Connects())
		}
		t.Logf("the publisher reconnected: %d connects", c.Connects())
	}
	published := []string{first.ID.String(), last.ID.String()}
	keys := map[string]string{} // ID -> ordering key, of every message sent
	for _, m := range append([]outbox.Message{first, last}, held...) {
		keys[m.ID.String()] = m.OrderingKey
	}
	times := map[string]int{}
	var firsts []string // first arrivals, in order
	for _, m := range dest.Read(t) {
		if key, ok := keys[m.ID]; !ok || m.OrderingKey != key || m.Source != relaytest.Source || m.EventType != relaytest.EventType ||
			m.SchemaVersion != relaytest.Version || m.Metadata[relaytest.MetadataKey] != relaytest.MetadataVal {
			t.Fatalf("message %+v is not one the case published with its fields", m)
		}
		if times[m.ID] == 0 {
			firsts = append(firsts, m.ID)
		}
		times[m.ID]++
	}
	lost, doubled, received := 0, 0, 0
	for _, id := range published {
		switch n := times[id]; {
		case n == 0:
			lost++
		case n > 1:
			doubled++
		}
		received += times[id]
	}
	arrived := 0
	for _, m := range held {
		arrived += times[m.ID.String()]
	}
	line := fmt.Sprintf("publisher context: sent=%d published=%d received=%d lost=%d doubled=%d blackholed_arrived=%d",
		len(published)+len(held), len(published), received+arrived, lost, doubled, arrived)
	t.Log(line)
	if lost != 0 || (doubled != 0 && d.Deduplicates()) {
		t.Fatalf("case failed: %s", line)
	}
	// Both share an ordering key: the later one must not arrive first.
	for _, id := range firsts {
		if id == published[1] {
			t.Fatalf("ordering key order-0: the message published after the fault arrived before the first (%s)", line)
		}
		if id == published[0] {
			break
		}
	}
}
