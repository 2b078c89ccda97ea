package mqtt_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/transport/mqtt"
)

// Failure drills. Each prints one summary line and asserts that nothing was
// lost and nothing applied twice, counting applications in a business table.
// "acked" is what the broker no longer redelivers when the session is
// resumed after the drill.

const drillMessages = 200

func drillID(i int) string { return fmt.Sprintf("drill-%04d", i) }

func drillIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = drillID(i)
	}
	return ids
}

// publishAll publishes n messages from a goroutine.
func (e *env) publishAll(t testing.TB, n int) <-chan error {
	pub := e.publisher(t)
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if err := tryPublish(pub, e.topic, drillID(i), fmt.Sprintf(`{"orderId":"o-%d","n":%d}`, i, i)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// The consumer's connection to the broker is cut repeatedly, and refused for
// a while, in the middle of a stream (a TCP proxy between the two).
func TestDrillConnectionCut(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	proxy, err := faultproxy.New("tcp", parseURL(t, url).Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	pool := newPool(t, testDSN(t))
	e := newEnv(t, url)
	dead := e.subscribeDead(t)
	log, logs := capture()
	stop := run(t, newConsumer(t, newClient(t, pool), e.config("mqtt://"+proxy.Addr(), log)))

	published := e.publishAll(t, drillMessages)
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
	eventually(t, 60*time.Second, "every message accepted", func() bool { return receipts(t, pool) == drillMessages })
	waitQuiet(t, logs)
	stop()
	if cuts < 3 {
		t.Fatalf("only %d connections cut", cuts)
	}
	r := tally{sent: drillMessages, acked: drillMessages - e.leftovers(t), dead: len(dead.all())}
	r.apply(t, pool, drillIDs(drillMessages))
	r.check(t, "mqtt connection cut")
}

// PostgreSQL is unreachable for a while: the consumer acknowledges nothing
// and reconnects for redeliveries; after the database returns everything is
// applied once.
func TestDrillDatabaseDown(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	dsn := testDSN(t)
	direct := newPool(t, dsn)
	proxy, proxied := dbProxy(t, dsn)
	e := newEnv(t, url)
	dead := e.subscribeDead(t)
	log, logs := capture()
	stop := run(t, newConsumer(t, newClient(t, proxied), e.config(url, log)))

	const half = drillMessages / 2
	pub := e.publisher(t)
	for i := range half {
		publish(t, pub, e.topic, drillID(i), fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	eventually(t, 60*time.Second, "the first half accepted", func() bool { return receipts(t, direct) == half })

	proxy.Refuse()
	proxy.Cut()
	for i := half; i < drillMessages; i++ {
		publish(t, pub, e.topic, drillID(i), fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	eventually(t, 30*time.Second, "redeliveries while the database is down", func() bool {
		return strings.Count(logs.String(), "reconnecting for redelivery") >= 3
	})
	if n := receipts(t, direct); n != half {
		t.Fatalf("%d receipts while the database is down, want %d", n, half)
	}
	proxy.Resume()

	eventually(t, 60*time.Second, "every message accepted", func() bool { return receipts(t, direct) == drillMessages })
	waitQuiet(t, logs)
	stop()
	r := tally{sent: drillMessages, acked: drillMessages - e.leftovers(t), dead: len(dead.all())}
	r.apply(t, direct, drillIDs(drillMessages))
	r.check(t, "mqtt database down")
}

// A changed redelivery (same event ID, different content) ends on the
// dead-letter topic with the conflict reason; the stored receipt is
// unchanged.
func TestDrillChangedRedelivery(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	pool := newPool(t, testDSN(t))
	e := newEnv(t, url)
	dead := e.subscribeDead(t)
	log, logs := capture()
	stop := run(t, newConsumer(t, newClient(t, pool), e.config(url, log)))

	pub := e.publisher(t)
	publish(t, pub, e.topic, "evt-1", `{"orderId":"o-1","total":"10.00"}`)
	eventually(t, 20*time.Second, "the original accepted", func() bool { return receipts(t, pool) == 1 })
	before := receiptRow(t, pool, "evt-1")

	publish(t, pub, e.topic, "evt-1", `{"orderId":"o-1","total":"99.00"}`)
	eventually(t, 20*time.Second, "the dead letter", func() bool { return len(dead.all()) == 1 })
	dl := dead.all()[0]
	u := dl.Properties.User
	if u.Get(mqtt.PropertyCode) != "IDENTITY_CONFLICT" || !strings.Contains(u.Get(mqtt.PropertyReason), "IDENTITY_CONFLICT") ||
		!strings.Contains(u.Get(mqtt.PropertyReason), "evt-1") || !strings.Contains(string(dl.Payload), `"99.00"`) {
		t.Fatalf("dead letter %v %s", u, dl.Payload)
	}
	if after := receiptRow(t, pool, "evt-1"); after != before {
		t.Fatalf("receipt changed:\nbefore %s\nafter  %s", before, after)
	}
	waitQuiet(t, logs)
	stop()
	r := tally{sent: 2, acked: 2 - len(dead.all()) - e.leftovers(t), dead: len(dead.all())}
	r.apply(t, pool, []string{"evt-1"})
	r.check(t, "mqtt changed redelivery")
}

// waitQuiet waits until the consumer has logged nothing for half a second:
// the redeliveries a reconnect brought are handled and acknowledged by then.
func waitQuiet(t testing.TB, logs *logBuffer) {
	t.Helper()
	last, since := -1, time.Now()
	eventually(t, 60*time.Second, "the consumer to go quiet", func() bool {
		if n := len(logs.String()); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= 500*time.Millisecond
	})
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
