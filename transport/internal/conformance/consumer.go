package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
)

// ConsumerDriver adapts one transport's consumer to the suite.
type ConsumerDriver interface {
	// SharedAddr is the host:port of the shared test broker; it skips the
	// test, or fails it with CI=true, when the broker is missing
	// (brokertest.Require).
	SharedAddr(t *testing.T) string
	// PrivateBroker starts a broker of the test's own with durable
	// settings (StartProcess), for the restart case.
	PrivateBroker(t *testing.T) Broker
	// NewChannel makes a fresh destination (stream, queue, topic) and its
	// dead-letter destination on the broker at addr, removed at test end.
	NewChannel(t *testing.T, addr string) Channel
	// Skip is why case c cannot apply to this broker, or "".
	Skip(c Case) string
}

// Channel is one case's destination on the broker.
type Channel interface {
	// Send puts a message with broker message ID id and payload on the
	// destination. The driver's decoder maps it to an inbox message with
	// the package's Source, Consumer, EventType and SchemaVersion, id as
	// MessageID and payload as Payload; an empty payload makes the decoder
	// fail.
	Send(t testing.TB, id, payload string)
	// Start runs the adapter's consumer on the destination until the test
	// ends or stop is called (stop checks that Run returned nil). An error
	// is the adapter's constructor refusing the setup.
	Start(t testing.TB, s Setup) (stop func(), err error)
	// Unsettled is how many messages the broker still holds for the
	// consumer: neither acknowledged nor dead-lettered.
	Unsettled(t testing.TB) int
	// DeadLetters is what the dead-letter destination holds.
	DeadLetters(t testing.TB) []DeadLetter
}

// Setup is what a consumer is started with.
type Setup struct {
	Accepter Accepter    // what the consumer accepts into
	Scope    inbox.Scope // the scope of every message
	// Addr is the host:port to connect to: the broker, or a fault proxy in
	// front of it.
	Addr string
	// DeliveryLimit, when not 0, is the deliveries without an accept after
	// which a message is dead-lettered; 0 asks for a limit high enough that
	// a case's outage never exhausts it.
	DeliveryLimit int
	Log           *slog.Logger // the consumer's logger
}

// RunConsumer runs every consumer case against d.
func RunConsumer(t *testing.T, d ConsumerDriver) {
	cases := []struct {
		c  Case
		fn func(*testing.T, ConsumerDriver)
	}{
		{AcceptBeforeAck, consumerAcceptBeforeAck},
		{DuplicateRedelivery, consumerDuplicate},
		{ChangedRedelivery, consumerChanged},
		{Invalid, consumerInvalid},
		{DatabaseOutage, consumerDatabaseOutage},
		{ConsumerCut, consumerCut},
		{Cancel, consumerCancel},
		{Poison, consumerPoison},
		{EmptyTenant, consumerEmptyTenant},
		{ConsumerRestart, consumerRestart},
	}
	for _, tc := range cases {
		t.Run(string(tc.c), func(t *testing.T) {
			t.Parallel()
			skip(t, d, tc.c)
			tc.fn(t, d)
		})
	}
}

// start starts a consumer the case expects to be accepted by the adapter.
func start(t testing.TB, ch Channel, s Setup) (stop func()) {
	t.Helper()
	if s.Log == nil {
		s.Log = testlog.Errors(t)
	}
	if s.Scope == (inbox.Scope{}) {
		s.Scope = inbox.Tenant(Tenant)
	}
	stop, err := ch.Start(t, s)
	if err != nil {
		t.Fatalf("starting the consumer: %v", err)
	}
	return stop
}

func settled(t testing.TB, ch Channel, within time.Duration) {
	t.Helper()
	drill.Eventually(t, within, "every message settled", func() bool { return ch.Unsettled(t) == 0 })
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

func payload(i int) string { return fmt.Sprintf(`{"orderId":"o-%d","n":%d}`, i, i) }

// A message is acknowledged only after its accept returned: while the
// accept is held, the broker still holds the message.
func consumerAcceptBeforeAck(t *testing.T, d ConsumerDriver) {
	addr := d.SharedAddr(t)
	pool := newPool(t)
	ch := d.NewChannel(t, addr)
	s := newSpy(newClient(t, pool))
	release := s.hold()
	defer release()
	start(t, ch, Setup{Accepter: s, Addr: addr})
	ch.Send(t, "evt-1", `{"orderId":"o-1"}`)
	select {
	case <-s.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the consumer did not call Accept within 30s")
	}
	time.Sleep(500 * time.Millisecond) // an adapter acking early would have done it by now
	if n := ch.Unsettled(t); n != 1 {
		t.Fatalf("%d messages unsettled while the accept is held, want 1: acknowledged before the accept", n)
	}
	release()
	settled(t, ch, 30*time.Second)
	if n := receipts(t, pool); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}
}

// A redelivery with the same content (keys reordered) is a duplicate: it
// is acknowledged, stored once, applied once, and not dead-lettered.
func consumerDuplicate(t *testing.T, d ConsumerDriver) {
	addr := d.SharedAddr(t)
	pool := newPool(t)
	ledger := drill.NewLedger(t, pool, Consumer)
	ch := d.NewChannel(t, addr)
	start(t, ch, Setup{Accepter: newClient(t, pool), Addr: addr})
	ch.Send(t, "evt-1", `{"orderId":"o-1","total":"10.00"}`)
	ch.Send(t, "evt-2", `{"orderId":"o-2"}`)
	settled(t, ch, 30*time.Second)
	ch.Send(t, "evt-1", `{"total":"10.00","orderId":"o-1"}`)
	settled(t, ch, 30*time.Second)
	var n int
	err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_receipts_live WHERE scope_id = $1", Tenant).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d receipts of %s, want 2", n, Tenant)
	}
	if dl := deadLetters(t, ch); len(dl) != 0 {
		t.Fatalf("dead letters %v, want none", dl)
	}
	ledger.Report(t, "duplicate redelivery", []string{"evt-1", "evt-2"}, 3)
}

// A redelivery with changed content ends on the dead-letter destination
// with reason conflict; the stored receipt is unchanged.
func consumerChanged(t *testing.T, d ConsumerDriver) {
	addr := d.SharedAddr(t)
	pool := newPool(t)
	ledger := drill.NewLedger(t, pool, Consumer)
	ch := d.NewChannel(t, addr)
	start(t, ch, Setup{Accepter: newClient(t, pool), Addr: addr})
	ch.Send(t, "evt-1", `{"orderId":"o-1","total":"10.00"}`)
	settled(t, ch, 30*time.Second)
	id, before := receiptRow(t, pool, "evt-1")
	ch.Send(t, "evt-1", `{"orderId":"o-1","total":"99.00"}`)
	drill.Eventually(t, 30*time.Second, "the dead letter", func() bool { return len(deadLetters(t, ch)) == 1 })
	dl := deadLetters(t, ch)[0]
	if dl.Reason != ReasonConflict || dl.MessageID != "evt-1" || dl.Receipt != id || !strings.Contains(dl.Payload, `"99.00"`) {
		t.Fatalf("dead letter %+v, want the changed evt-1 with reason %s naming receipt %s", dl, ReasonConflict, id)
	}
	settled(t, ch, 30*time.Second)
	if _, after := receiptRow(t, pool, "evt-1"); after != before {
		t.Fatalf("receipt changed:\nbefore %s\nafter  %s", before, after)
	}
	ledger.Report(t, "changed redelivery", []string{"evt-1"}, 1)
}

// receiptRow is the ID and the whole stored row, as text, of message id's
// receipt.
func receiptRow(t testing.TB, pool *pgxpool.Pool, id string) (receipt, row string) {
	t.Helper()
	var rid inbox.ID
	err := pool.QueryRow(context.Background(), "SELECT r.id, to_jsonb(r)::text FROM pginbox_receipts_live r WHERE message_id = $1", id).Scan(&rid, &row)
	if err != nil {
		t.Fatal(err)
	}
	return rid.String(), row
}

// Messages the inbox can never take go to the dead-letter destination with
// their reason and are settled; nothing is stored, and the consumer goes on
// with the messages after them.
func consumerInvalid(t *testing.T, d ConsumerDriver) {
	addr := d.SharedAddr(t)
	pool := newPool(t)
	ch := d.NewChannel(t, addr)
	start(t, ch, Setup{Accepter: newClient(t, pool), Addr: addr})
	want := map[string]string{
		"bad-json":   ReasonInvalid,
		"no-payload": ReasonDecode,
		"too-deep":   ReasonInvalid,
	}
	ch.Send(t, "bad-json", `{"orderId":`)
	ch.Send(t, "no-payload", "")
	ch.Send(t, "too-deep", strings.Repeat("[", 70)+strings.Repeat("]", 70))
	ch.Send(t, "good", `{"orderId":"o-1"}`)
	drill.Eventually(t, 30*time.Second, "three dead letters", func() bool { return len(deadLetters(t, ch)) == 3 })
	for _, dl := range deadLetters(t, ch) {
		if want[dl.MessageID] != dl.Reason {
			t.Errorf("dead letter %+v, want reason %q", dl, want[dl.MessageID])
		}
	}
	settled(t, ch, 30*time.Second)
	if n := receipts(t, pool); n != 1 {
		t.Fatalf("%d receipts, want 1 (the valid message)", n)
	}
}

// PostgreSQL is unreachable for a while: nothing is acknowledged, messages
// are delivered again, and once the database is back every message is
// applied exactly once.
func consumerDatabaseOutage(t *testing.T, d ConsumerDriver) {
	addr := d.SharedAddr(t)
	dsn := inboxtest.Database(t)
	ledger := drill.NewLedger(t, drill.Pool(t, dsn, nil), Consumer)
	proxy, proxied := drill.ProxiedPool(t, dsn)
	ch := d.NewChannel(t, addr)
	s := newSpy(newClient(t, proxied))
	start(t, ch, Setup{Accepter: s, Addr: addr})

	all := ids("outage", 60)
	half := len(all) / 2
	for i, id := range all[:half] {
		ch.Send(t, id, payload(i))
	}
	settled(t, ch, 60*time.Second)
	proxy.Refuse()
	proxy.Cut()
	for i, id := range all[half:] {
		ch.Send(t, id, payload(half+i))
	}
	drill.Eventually(t, 60*time.Second, "a message delivered again while the database is down", func() bool { return s.maxAttempts() >= 2 })
	if n := ch.Unsettled(t); n != len(all)-half {
		t.Fatalf("%d unsettled while the database is down, want %d: acknowledged without an accept", n, len(all)-half)
	}
	if n := ledger.Receipts(t); n != half {
		t.Fatalf("%d receipts while the database is down, want %d", n, half)
	}
	if dl := deadLetters(t, ch); len(dl) != 0 {
		t.Fatalf("dead letters during the outage: %v", dl)
	}
	proxy.Resume()
	settled(t, ch, 90*time.Second)
	ledger.Report(t, "database outage", all, int64(len(all)))
}

// The consumer's broker connection is cut three times in the middle of a
// stream of messages, once with reconnects refused for a while: every
// message is applied exactly once.
func consumerCut(t *testing.T, d ConsumerDriver) {
	addr := d.SharedAddr(t)
	pool := newPool(t)
	ledger := drill.NewLedger(t, pool, Consumer)
	ch := d.NewChannel(t, addr)
	proxy := newProxy(t, addr)
	start(t, ch, Setup{Accepter: newClient(t, pool), Addr: proxy.Addr()})

	const n = 300
	all := ids("cut", n)
	for i, id := range all {
		ch.Send(t, id, payload(i))
	}
	cuts := 0
	for _, at := range []int{n / 4, n / 2, 3 * n / 4} {
		drill.Eventually(t, 60*time.Second, fmt.Sprintf("%d receipts", at), func() bool { return ledger.Receipts(t) >= at })
		if at == n/2 {
			cuts += drill.Down(t, proxy)
			time.Sleep(500 * time.Millisecond)
			proxy.Resume()
			continue
		}
		cuts += drill.Cut(t, proxy)
	}
	settled(t, ch, 90*time.Second)
	if cuts < 3 {
		t.Fatalf("only %d connections cut", cuts)
	}
	// Acknowledgements sent just before a cut can be lost with it (the
	// consumer counted them): the broker resends those messages once the
	// consumer is back, and it acknowledges them as duplicates. The case
	// ends after that, so the broker holds nothing for it (seen on MQTT
	// under load: 210 messages still held for the session).
	drill.Eventually(t, 60*time.Second, "the consumer connected again", func() bool { return proxy.Open() > 0 })
	time.Sleep(2 * time.Second)
	settled(t, ch, 30*time.Second)
	ledger.Report(t, "consumer connection cut", all, n)
}

// Cancelling Run's context while an accept is in flight: Run returns nil,
// the message is not acknowledged, and the next consumer accepts it.
// Nothing sent after the stop is taken.
func consumerCancel(t *testing.T, d ConsumerDriver) {
	addr := d.SharedAddr(t)
	pool := newPool(t)
	ch := d.NewChannel(t, addr)
	s := newSpy(newClient(t, pool))
	release := s.hold()
	defer release()
	stop := start(t, ch, Setup{Accepter: s, Addr: addr})
	ch.Send(t, "evt-1", `{"orderId":"o-1"}`)
	select {
	case <-s.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the consumer did not call Accept within 30s")
	}
	stop() // fails the test unless Run returns nil within a minute
	ch.Send(t, "evt-2", `{"orderId":"o-2"}`)
	time.Sleep(300 * time.Millisecond)
	if n := ch.Unsettled(t); n != 2 {
		t.Fatalf("%d unsettled after the stop, want 2 (the cancelled accept and the later message)", n)
	}
	if n := receipts(t, pool); n != 0 {
		t.Fatalf("%d receipts after the stop, want 0", n)
	}
	release()
	start(t, ch, Setup{Accepter: newClient(t, pool), Addr: addr})
	settled(t, ch, 60*time.Second)
	if n := receipts(t, pool); n != 2 {
		t.Fatalf("%d receipts after the restart, want 2", n)
	}
}

// A message whose accept fails every time is dead-lettered once its
// deliveries run out (reason delivery_limit); the messages after it are
// accepted.
func consumerPoison(t *testing.T, d ConsumerDriver) {
	addr := d.SharedAddr(t)
	pool := newPool(t)
	ch := d.NewChannel(t, addr)
	s := newSpy(newClient(t, pool))
	s.poison = "poison"
	start(t, ch, Setup{Accepter: s, Addr: addr, DeliveryLimit: 3})
	ch.Send(t, "poison", `{"orderId":"o-0"}`)
	for i, id := range ids("after", 5) {
		ch.Send(t, id, payload(i+1))
	}
	drill.Eventually(t, 60*time.Second, "the poison message dead-lettered", func() bool { return len(deadLetters(t, ch)) == 1 })
	dl := deadLetters(t, ch)[0]
	if dl.MessageID != "poison" || dl.Reason != ReasonDeliveryLimit {
		t.Fatalf("dead letter %+v, want poison with reason %s", dl, ReasonDeliveryLimit)
	}
	settled(t, ch, 30*time.Second)
	if n := receipts(t, pool); n != 5 {
		t.Fatalf("%d receipts, want 5 (every message but the poison)", n)
	}
	if f := s.failures(); f < 2 {
		t.Fatalf("the poison message failed %d times, want at least 2 before it was dead-lettered", f)
	}
}

// A consumer whose scope is a tenant without an ID stores nothing: either
// the adapter refuses the setup, or every message is rejected as invalid.
func consumerEmptyTenant(t *testing.T, d ConsumerDriver) {
	addr := d.SharedAddr(t)
	pool := newPool(t)
	ch := d.NewChannel(t, addr)
	stop, err := ch.Start(t, Setup{Accepter: newClient(t, pool), Scope: inbox.Tenant(""), Addr: addr, Log: testlog.Errors(t)})
	if err != nil {
		t.Logf("refused at start: %v", err)
		return
	}
	defer stop()
	ch.Send(t, "evt-1", `{"orderId":"o-1"}`)
	drill.Eventually(t, 30*time.Second, "the dead letter", func() bool { return len(deadLetters(t, ch)) == 1 })
	if dl := deadLetters(t, ch)[0]; dl.Reason != ReasonInvalid || dl.MessageID != "evt-1" {
		t.Fatalf("dead letter %+v, want evt-1 with reason %s", dl, ReasonInvalid)
	}
	settled(t, ch, 30*time.Second)
	if n := receipts(t, pool); n != 0 {
		t.Fatalf("%d receipts with an empty tenant, want none", n)
	}
}

// The broker process is killed and restarted twice (a broker of the test's
// own, with durable settings) while the consumer works through a stream: nothing
// acknowledged is lost, and every message is applied exactly once.
func consumerRestart(t *testing.T, d ConsumerDriver) {
	b := d.PrivateBroker(t)
	pool := newPool(t)
	ledger := drill.NewLedger(t, pool, Consumer)
	ch := d.NewChannel(t, b.Addr())
	const n = 200
	all := ids("restart", n)
	for i, id := range all {
		ch.Send(t, id, payload(i))
	}
	start(t, ch, Setup{Accepter: newClient(t, pool), Addr: b.Addr()})
	for _, at := range []int{n / 3, 2 * n / 3} {
		drill.Eventually(t, 60*time.Second, fmt.Sprintf("%d receipts", at), func() bool { return ledger.Receipts(t) >= at })
		b.Restart(t)
	}
	deadline := time.Now().Add(60 * time.Second)
	for ledger.Receipts(t) != n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 60s waiting for every message received after the restart: %d receipts of %d sent, %d unsettled",
				ledger.Receipts(t), n, ch.Unsettled(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
	settled(t, ch, 60*time.Second)
	ledger.Report(t, "consumer broker restart", all, n)
}

// deadLetters is what ch's dead-letter destination holds, each rejected
// message once: dead-lettering is at least once (a dead letter whose
// acknowledgement timed out is written again on the next delivery).
func deadLetters(t testing.TB, ch Channel) []DeadLetter {
	t.Helper()
	var out []DeadLetter
	seen := map[DeadLetter]bool{}
	for _, dl := range ch.DeadLetters(t) {
		if !seen[dl] {
			seen[dl] = true
			out = append(out, dl)
		}
	}
	return out
}
