package nats_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/faultproxy"
	pgnats "github.com/pginbox/pginbox/transport/nats"
)

// Failure drills. Each prints one summary line and asserts that nothing was
// lost and nothing applied twice, counting applications in a business table.

const drillMessages = 300

func drillID(i int) string { return fmt.Sprintf("drill-%04d", i) }

func drillIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = drillID(i)
	}
	return ids
}

// publishAll publishes n messages from a goroutine; the returned channel
// yields its error (nil) once every message was acknowledged by the stream.
func (e *env) publishAll(n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if err := e.tryPublish(drillID(i), fmt.Sprintf(`{"orderId":"o-%d","n":%d}`, i, i)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

func receipts(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pginbox_receipts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The broker crashes (SIGKILL) twice in the middle of a stream and comes
// back on the same port and storage.
func TestDrillServerRestart(t *testing.T) {
	t.Parallel()
	srv := startPrivateServer(t)
	pool := newPool(t, testDSN(t))
	e := newEnv(t, srv.url(), true)
	run(t, newConsumer(t, connect(t, srv.url()), newClient(t, pool), e.config(quietLogger(t))))

	published := e.publishAll(drillMessages)
	for _, at := range []int{drillMessages / 3, 2 * drillMessages / 3} {
		eventually(t, 60*time.Second, fmt.Sprintf("%d receipts", at), func() bool { return receipts(t, pool) >= at })
		eventually(t, 30*time.Second, "a connection to cut", func() bool { return proxy.Open() > 0 })
		srv.kill(t)
		time.Sleep(300 * time.Millisecond)
		srv.start(t)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "every message settled", func() bool { return e.unsettled(t) == 0 })
	r := tally{sent: drillMessages, acked: drillMessages - e.unsettled(t), dead: len(e.deadLetters(t))}
	r.apply(t, pool, drillIDs(drillMessages))
	r.check(t, "nats server restart")
}

// The consumer's connection to the broker is cut repeatedly, and refused for
// a while, in the middle of a stream (a TCP proxy between the two).
func TestDrillConnectionCut(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	addr := strings.TrimPrefix(url, "nats://")
	proxy, err := faultproxy.New("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	pool := newPool(t, testDSN(t))
	e := newEnv(t, url, true)
	run(t, newConsumer(t, connect(t, "nats://"+proxy.Addr()), newClient(t, pool), e.config(quietLogger(t))))

	published := e.publishAll(drillMessages)
	cuts := 0
	for _, at := range []int{drillMessages / 4, drillMessages / 2, 3 * drillMessages / 4} {
		eventually(t, 60*time.Second, fmt.Sprintf("%d receipts", at), func() bool { return receipts(t, pool) >= at })
		eventually(t, 30*time.Second, "a connection to cut", func() bool { return proxy.Open() > 0 })
		if at == drillMessages/2 { // down for a while: refused, not just reset
			proxy.Refuse()
			cuts += proxy.Cut()
			time.Sleep(500 * time.Millisecond)
			proxy.Resume()
			continue
		}
		cuts += proxy.Cut()
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "every message settled", func() bool { return e.unsettled(t) == 0 })
	if cuts < 3 {
		t.Fatalf("only %d connections cut", cuts)
	}
	r := tally{sent: drillMessages, acked: drillMessages - e.unsettled(t), dead: len(e.deadLetters(t))}
	r.apply(t, pool, drillIDs(drillMessages))
	r.check(t, "nats connection cut")
}

// PostgreSQL is unreachable for a while: the consumer acks nothing, the
// broker redelivers, and after the database returns everything is applied
// once.
func TestDrillDatabaseDown(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	dsn := testDSN(t)
	direct := newPool(t, dsn)
	proxy, proxied := dbProxy(t, dsn)
	e := newEnv(t, url, true)
	cfg := e.config(quietLogger(t))
	cfg.MaxDeliver = 1000 // this drill is about riding out the outage, not about exhaustion
	run(t, newConsumer(t, connect(t, url), newClient(t, proxied), cfg))

	const half = drillMessages / 2
	for i := range half {
		e.publish(t, drillID(i), fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	eventually(t, 60*time.Second, "the first half settled", func() bool { return e.unsettled(t) == 0 })

	proxy.Refuse()
	proxy.Cut()
	for i := half; i < drillMessages; i++ {
		e.publish(t, drillID(i), fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	eventually(t, 30*time.Second, "redeliveries while the database is down", func() bool {
		return e.consumerInfo(t).NumRedelivered >= 10
	})
	if n := e.unsettled(t); n != drillMessages-half {
		t.Fatalf("%d unsettled while the database is down, want %d: something was acked without an accept", n, drillMessages-half)
	}
	if n := receipts(t, direct); n != half {
		t.Fatalf("%d receipts while the database is down, want %d", n, half)
	}
	proxy.Resume()

	eventually(t, 60*time.Second, "every message settled", func() bool { return e.unsettled(t) == 0 })
	r := tally{sent: drillMessages, acked: drillMessages - e.unsettled(t), dead: len(e.deadLetters(t))}
	r.apply(t, direct, drillIDs(drillMessages))
	r.check(t, "nats database down")
}

// A changed redelivery (same event ID, different content) ends under the
// dead-letter subject with the conflict reason; the stored receipt is
// unchanged.
func TestDrillChangedRedelivery(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	pool := newPool(t, testDSN(t))
	e := newEnv(t, url, true)
	cfg := e.config(quietLogger(t))
	cfg.Decode = decodeByEventID
	run(t, newConsumer(t, connect(t, url), newClient(t, pool), cfg))

	e.publish(t, "pub-1", `{"eventId":"evt-1","orderId":"o-1","total":"10.00"}`)
	eventually(t, 20*time.Second, "the original acked", func() bool { return e.unsettled(t) == 0 })
	before := receiptRow(t, pool, "evt-1")

	e.publish(t, "pub-2", `{"eventId":"evt-1","orderId":"o-1","total":"99.00"}`)
	eventually(t, 20*time.Second, "the dead letter", func() bool { return len(e.deadLetters(t)) == 1 })
	dl := e.deadLetters(t)[0]
	if got := dl.Header.Get(pgnats.HeaderCode); got != "IDENTITY_CONFLICT" {
		t.Fatalf("dead letter code %q", got)
	}
	if reason := dl.Header.Get(pgnats.HeaderReason); !strings.Contains(reason, "IDENTITY_CONFLICT") || !strings.Contains(reason, "evt-1") {
		t.Fatalf("dead letter reason %q", reason)
	}
	if !strings.Contains(string(dl.Data), `"99.00"`) || dl.Header.Get("Pginbox-Nats-Msg-Id") != "pub-2" {
		t.Fatalf("dead letter is not the changed message: %s %v", dl.Data, dl.Header)
	}
	eventually(t, 10*time.Second, "the changed message terminated", func() bool { return e.unsettled(t) == 0 })
	if after := receiptRow(t, pool, "evt-1"); after != before {
		t.Fatalf("receipt changed:\nbefore %s\nafter  %s", before, after)
	}
	r := tally{sent: 2, acked: 1, dead: 1}
	r.apply(t, pool, []string{"evt-1"})
	r.check(t, "nats changed redelivery")
}

// receiptRow is the stored receipt of message id as text.
func receiptRow(t testing.TB, pool *pgxpool.Pool, id string) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT to_jsonb(r)::text FROM pginbox_receipts r WHERE message_id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// When MaxDeliver deliveries fail (here: the database is down), the server's
// advisory makes the consumer move the message to the dead-letter subject
// with the last error.
func TestMaxDeliveriesDeadLetter(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	dsn := testDSN(t)
	proxy, proxied := dbProxy(t, dsn)
	e := newEnv(t, url, true)
	cfg := e.config(quietLogger(t))
	cfg.MaxDeliver = 3
	run(t, newConsumer(t, connect(t, url), newClient(t, proxied), cfg))
	proxy.Refuse()

	for i := range 3 {
		e.publish(t, drillID(i), fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	eventually(t, 30*time.Second, "three dead letters", func() bool { return len(e.deadLetters(t)) == 3 })
	for _, dl := range e.deadLetters(t) {
		reason := dl.Header.Get(pgnats.HeaderReason)
		if dl.Header.Get(pgnats.HeaderCode) != pgnats.CodeMaxDeliveries ||
			!strings.Contains(reason, "not accepted after 3 deliveries") ||
			!strings.Contains(reason, "last error: pginbox: accept") {
			t.Errorf("dead letter %s: code %q reason %q", dl.Header.Get("Pginbox-Nats-Msg-Id"), dl.Header.Get(pgnats.HeaderCode), reason)
		}
		if dl.Header.Get(pgnats.HeaderDeliveries) != "3" {
			t.Errorf("dead letter deliveries %q, want 3", dl.Header.Get(pgnats.HeaderDeliveries))
		}
	}
	proxy.Resume()
	if n := receipts(t, newPool(t, dsn)); n != 0 {
		t.Fatalf("%d receipts, want none", n)
	}
}
