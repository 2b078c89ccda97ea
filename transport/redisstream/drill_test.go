package redisstream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/transport/redisstream"
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

// addAll adds n entries from a goroutine, through the test's own client.
func (e *env) addAll(n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := range n {
			err := e.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: e.stream, Values: map[string]any{
				"message_id": drillID(i), "payload": fmt.Sprintf(`{"orderId":"o-%d","n":%d}`, i, i),
			}}).Err()
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// The consumer's connection to Redis is cut repeatedly, and refused for a
// while, in the middle of a stream (a TCP proxy between the two).
func TestDrillConnectionCut(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	proxy, err := faultproxy.New("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	pool := newPool(t, testDSN(t))
	e := newEnv(t, addr)
	run(t, newConsumer(t, newRedis(t, proxy.Addr()), newClient(t, pool), e.config(quietLogger(t))))

	added := e.addAll(drillMessages)
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
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "every entry settled", func() bool { return e.unsettled(t) == 0 })
	if cuts < 3 {
		t.Fatalf("only %d connections cut", cuts)
	}
	r := tally{sent: drillMessages, acked: drillMessages - len(e.deadLetters(t)), dead: len(e.deadLetters(t))}
	r.apply(t, pool, drillIDs(drillMessages))
	r.check(t, "redis connection cut")
}

// PostgreSQL is unreachable for a while: the consumer acknowledges nothing,
// the entries are claimed again and again, and after the database returns
// everything is applied once.
func TestDrillDatabaseDown(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	dsn := testDSN(t)
	direct := newPool(t, dsn)
	proxy, proxied := dbProxy(t, dsn)
	e := newEnv(t, addr)
	cfg := e.config(quietLogger(t))
	cfg.MaxDeliveries = 1000 // this drill is about riding out the outage, not about exhaustion
	run(t, newConsumer(t, newRedis(t, addr), newClient(t, proxied), cfg))

	const half = drillMessages / 2
	for i := range half {
		e.add(t, drillID(i), fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	eventually(t, 60*time.Second, "the first half settled", func() bool { return e.unsettled(t) == 0 })

	proxy.Refuse()
	proxy.Cut()
	for i := half; i < drillMessages; i++ {
		e.add(t, drillID(i), fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	eventually(t, 30*time.Second, "entries claimed again while the database is down", func() bool {
		return e.maxDeliveries(t) >= 3
	})
	if n := e.unsettled(t); n != drillMessages-half {
		t.Fatalf("%d unsettled while the database is down, want %d: something was acknowledged without an accept", n, drillMessages-half)
	}
	if n := receipts(t, direct); n != half {
		t.Fatalf("%d receipts while the database is down, want %d", n, half)
	}
	proxy.Resume()

	eventually(t, 60*time.Second, "every entry settled", func() bool { return e.unsettled(t) == 0 })
	r := tally{sent: drillMessages, acked: drillMessages - len(e.deadLetters(t)), dead: len(e.deadLetters(t))}
	r.apply(t, direct, drillIDs(drillMessages))
	r.check(t, "redis database down")
}

// maxDeliveries is the highest delivery count among pending entries.
func (e *env) maxDeliveries(t testing.TB) int64 {
	t.Helper()
	pending, err := e.rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{
		Stream: e.stream, Group: e.group, Start: "-", End: "+", Count: drillMessages,
	}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var most int64
	for _, p := range pending {
		most = max(most, p.RetryCount)
	}
	return most
}

// A changed redelivery (same event ID, different content) ends in the
// dead-letter stream with the conflict reason; the stored receipt is
// unchanged.
func TestDrillChangedRedelivery(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	pool := newPool(t, testDSN(t))
	e := newEnv(t, addr)
	run(t, newConsumer(t, newRedis(t, addr), newClient(t, pool), e.config(quietLogger(t))))

	e.add(t, "evt-1", `{"orderId":"o-1","total":"10.00"}`)
	eventually(t, 20*time.Second, "the original acknowledged", func() bool { return e.unsettled(t) == 0 })
	before := receiptRow(t, pool, "evt-1")

	changed := e.add(t, "evt-1", `{"orderId":"o-1","total":"99.00"}`)
	eventually(t, 20*time.Second, "the dead letter", func() bool { return len(e.deadLetters(t)) == 1 })
	dl := e.deadLetters(t)[0].Values
	if dl[redisstream.FieldCode] != "IDENTITY_CONFLICT" || dl[redisstream.FieldEntryID] != changed {
		t.Fatalf("dead letter %v", dl)
	}
	if reason := fmt.Sprint(dl[redisstream.FieldReason]); !strings.Contains(reason, "IDENTITY_CONFLICT") || !strings.Contains(reason, "evt-1") {
		t.Fatalf("dead letter reason %q", reason)
	}
	if !strings.Contains(fmt.Sprint(dl["payload"]), `"99.00"`) {
		t.Fatalf("dead letter is not the changed entry: %v", dl)
	}
	eventually(t, 10*time.Second, "the changed entry acknowledged", func() bool { return e.unsettled(t) == 0 })
	if after := receiptRow(t, pool, "evt-1"); after != before {
		t.Fatalf("receipt changed:\nbefore %s\nafter  %s", before, after)
	}
	r := tally{sent: 2, acked: 1, dead: 1}
	r.apply(t, pool, []string{"evt-1"})
	r.check(t, "redis changed redelivery")
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

// After MaxDeliveries deliveries without an accept (here: the database is
// down) an entry moves to the dead-letter stream with the last error.
func TestMaxDeliveriesDeadLetter(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	dsn := testDSN(t)
	proxy, proxied := dbProxy(t, dsn)
	e := newEnv(t, addr)
	cfg := e.config(quietLogger(t))
	cfg.MaxDeliveries = 3
	run(t, newConsumer(t, newRedis(t, addr), newClient(t, proxied), cfg))
	proxy.Refuse()

	for i := range 3 {
		e.add(t, drillID(i), fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	eventually(t, 30*time.Second, "three dead letters", func() bool { return len(e.deadLetters(t)) == 3 })
	for _, dl := range e.deadLetters(t) {
		v := dl.Values
		reason := fmt.Sprint(v[redisstream.FieldReason])
		if v[redisstream.FieldCode] != redisstream.CodeMaxDeliveries ||
			!strings.Contains(reason, "not accepted after 3 deliveries") ||
			!strings.Contains(reason, "last error: pginbox: accept") ||
			v[redisstream.FieldDeliveries] != "4" {
			t.Errorf("dead letter %v", v)
		}
	}
	if n := e.unsettled(t); n != 0 {
		t.Fatalf("%d entries unacknowledged after dead-lettering", n)
	}
	proxy.Resume()
	if n := receipts(t, newPool(t, dsn)); n != 0 {
		t.Fatalf("%d receipts, want none", n)
	}
}
