package mqtt_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/mqtt"
)

// Failure drills. Each logs one summary line (sent, acked, applied, lost,
// doubled) and asserts, in a business table written by a real worker, that
// every message was applied exactly once. "acked" is what the broker no
// longer redelivers when the session is resumed after the drill.

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
	pool := newPool(t)
	ledger := drill.NewLedger(t, pool, testConsumer)
	e := newEnv(t, url)
	dead := e.subscribeDead(t)
	log, logs := testlog.Capture()
	stop := start(t, newClient(t, pool), e.config("mqtt://"+proxy.Addr(), log))

	published := e.publishAll(t, drillMessages)
	cuts := 0
	for _, at := range []int{drillMessages / 4, drillMessages / 2, 3 * drillMessages / 4} {
		drill.Eventually(t, 60*time.Second, fmt.Sprintf("%d receipts", at), func() bool { return receipts(t, pool) >= at })
		if at == drillMessages/2 { // down for a while: refused, not just reset
			cuts += drill.Down(t, proxy)
			time.Sleep(500 * time.Millisecond) // the outage's length is the fault
			proxy.Resume()
			continue
		}
		cuts += drill.Cut(t, proxy)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	drill.Eventually(t, 60*time.Second, "every message accepted", func() bool { return receipts(t, pool) == drillMessages })
	waitQuiet(t, logs)
	stop()
	if cuts < 3 {
		t.Fatalf("only %d connections cut", cuts)
	}
	if n := len(dead.all()); n != 0 {
		t.Fatalf("%d dead letters, want none", n)
	}
	ledger.Report(t, "mqtt connection cut", drillIDs(drillMessages), int64(drillMessages-e.leftovers(t)))
}

// PostgreSQL is unreachable for a while: the consumer acknowledges nothing
// and reconnects for redeliveries; after the database returns everything is
// applied once.
func TestDrillDatabaseDown(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	dsn := testDSN(t)
	direct := drill.Pool(t, dsn, nil)
	ledger := drill.NewLedger(t, direct, testConsumer)
	proxy, proxied := drill.ProxiedPool(t, dsn)
	e := newEnv(t, url)
	dead := e.subscribeDead(t)
	log, logs := testlog.Capture()
	stop := start(t, newClient(t, proxied), e.config(url, log))

	const half = drillMessages / 2
	pub := e.publisher(t)
	for i := range half {
		publish(t, pub, e.topic, drillID(i), fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	drill.Eventually(t, 60*time.Second, "the first half accepted", func() bool { return receipts(t, direct) == half })

	proxy.Refuse()
	proxy.Cut()
	for i := half; i < drillMessages; i++ {
		publish(t, pub, e.topic, drillID(i), fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	drill.Eventually(t, 30*time.Second, "redeliveries while the database is down", func() bool {
		return strings.Count(logs.String(), "reconnecting for redelivery") >= 3
	})
	if n := receipts(t, direct); n != half {
		t.Fatalf("%d receipts while the database is down, want %d", n, half)
	}
	proxy.Resume()

	drill.Eventually(t, 60*time.Second, "every message accepted", func() bool { return receipts(t, direct) == drillMessages })
	waitQuiet(t, logs)
	stop()
	if n := len(dead.all()); n != 0 {
		t.Fatalf("%d dead letters, want none", n)
	}
	ledger.Report(t, "mqtt database down", drillIDs(drillMessages), int64(drillMessages-e.leftovers(t)))
}

// A changed redelivery (same event ID, different content) ends on the
// dead-letter topic with the conflict reason; the stored receipt is
// unchanged.
func TestDrillChangedRedelivery(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	pool := newPool(t)
	ledger := drill.NewLedger(t, pool, testConsumer)
	e := newEnv(t, url)
	dead := e.subscribeDead(t)
	log, logs := testlog.Capture()
	stop := start(t, newClient(t, pool), e.config(url, log))

	pub := e.publisher(t)
	publish(t, pub, e.topic, "evt-1", `{"orderId":"o-1","total":"10.00"}`)
	drill.Eventually(t, 20*time.Second, "the original accepted", func() bool { return receipts(t, pool) == 1 })
	id, before := receiptRow(t, pool, "evt-1")

	publish(t, pub, e.topic, "evt-1", `{"orderId":"o-1","total":"99.00"}`)
	drill.Eventually(t, 20*time.Second, "the dead letter", func() bool { return len(dead.all()) == 1 })
	dl := dead.all()[0]
	u := dl.Properties.User
	if u.Get(mqtt.PropertyReason) != mqtt.ReasonConflict || u.Get(mqtt.PropertyReceipt) != id ||
		!strings.Contains(u.Get(mqtt.PropertyError), "IDENTITY_CONFLICT") || !strings.Contains(u.Get(mqtt.PropertyError), "evt-1") ||
		!strings.Contains(string(dl.Payload), `"99.00"`) {
		t.Fatalf("dead letter %v %s", u, dl.Payload)
	}
	if _, after := receiptRow(t, pool, "evt-1"); after != before {
		t.Fatalf("receipt changed:\nbefore %s\nafter  %s", before, after)
	}
	waitQuiet(t, logs)
	stop()
	if n := e.leftovers(t); n != 0 {
		t.Fatalf("%d messages redelivered after a restart: not acknowledged", n)
	}
	ledger.Report(t, "mqtt changed redelivery (1 of 2 dead-lettered)", []string{"evt-1"}, 1)
}

// waitQuiet waits until the consumer has logged nothing for half a second:
// the redeliveries a reconnect brought are handled and acknowledged by then.
func waitQuiet(t testing.TB, logs *testlog.Buffer) {
	t.Helper()
	last, since := -1, time.Now()
	drill.Eventually(t, 60*time.Second, "the consumer to go quiet", func() bool {
		if n := len(logs.String()); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= 500*time.Millisecond
	})
}

// receiptRow is the ID and the whole stored row, as text, of message id's
// receipt.
func receiptRow(t testing.TB, pool *pgxpool.Pool, id string) (receipt, row string) {
	t.Helper()
	var rid inbox.ID
	err := pool.QueryRow(context.Background(), `SELECT r.id, to_jsonb(r)::text FROM pginbox_receipts_live r WHERE message_id = $1`, id).Scan(&rid, &row)
	if err != nil {
		t.Fatal(err)
	}
	return rid.String(), row
}
