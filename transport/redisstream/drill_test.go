package redisstream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/redisstream"
)

// Failure drills. Each logs one summary line (sent, acked, applied, lost,
// doubled) and asserts, in a business table written by a real worker, that
// every message was applied exactly once.

const drillMessages = 300

func drillIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("drill-%04d", i)
	}
	return ids
}

// addAll adds an entry per id from a goroutine, through the test's own
// client.
func (e *env) addAll(ids []string) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i, id := range ids {
			err := e.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: e.stream, Values: map[string]any{
				"message_id": id, "payload": fmt.Sprintf(`{"orderId":"o-%d","n":%d}`, i, i),
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

// settled waits until the group has acknowledged every entry and returns
// how many it acknowledged after an accept (entries minus dead letters).
func (e *env) settled(t testing.TB, sent int) int64 {
	t.Helper()
	drill.Eventually(t, 60*time.Second, "every entry settled", func() bool { return e.unsettled(t) == 0 })
	return int64(sent - len(e.deadLetters(t)))
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
	pool := newPool(t)
	ledger := drill.NewLedger(t, pool, testConsumer)
	e := newEnv(t, addr)
	start(t, newClient(t, pool), e.config(newRedis(t, proxy.Addr()), testlog.Errors(t)))

	ids := drillIDs(drillMessages)
	added := e.addAll(ids)
	cuts := 0
	for _, at := range []int{drillMessages / 4, drillMessages / 2, 3 * drillMessages / 4} {
		drill.Eventually(t, 60*time.Second, fmt.Sprintf("%d receipts", at), func() bool { return ledger.Receipts(t) >= at })
		if at == drillMessages/2 { // down for a while: refused, not just reset
			cuts += drill.Down(t, proxy)
			time.Sleep(500 * time.Millisecond)
			proxy.Resume()
			continue
		}
		cuts += drill.Cut(t, proxy)
	}
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	acked := e.settled(t, drillMessages)
	if cuts < 3 {
		t.Fatalf("only %d connections cut", cuts)
	}
	ledger.Report(t, "redis connection cut", ids, acked)
}

// PostgreSQL is unreachable for a while: the consumer acknowledges nothing,
// the entries are claimed again and again, and after the database returns
// everything is applied once.
func TestDrillDatabaseDown(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	dsn := testDSN(t)
	direct := drill.Pool(t, dsn, nil)
	ledger := drill.NewLedger(t, direct, testConsumer)
	proxy, proxied := drill.ProxiedPool(t, dsn)
	e := newEnv(t, addr)
	cfg := e.config(newRedis(t, addr), testlog.Errors(t))
	cfg.MaxDeliveries = 1000 // this drill is about riding out the outage, not about exhaustion
	start(t, newClient(t, proxied), cfg)

	ids := drillIDs(drillMessages)
	const half = drillMessages / 2
	for i, id := range ids[:half] {
		e.add(t, id, fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	drill.Eventually(t, 60*time.Second, "the first half settled", func() bool { return e.unsettled(t) == 0 })

	proxy.Refuse()
	proxy.Cut()
	for i, id := range ids[half:] {
		e.add(t, id, fmt.Sprintf(`{"orderId":"o-%d"}`, half+i))
	}
	drill.Eventually(t, 30*time.Second, "entries claimed again while the database is down", func() bool {
		return e.maxDeliveries(t) >= 3
	})
	if n := e.unsettled(t); n != drillMessages-half {
		t.Fatalf("%d unsettled while the database is down, want %d: something was acknowledged without an accept", n, drillMessages-half)
	}
	if n := ledger.Receipts(t); n != half {
		t.Fatalf("%d receipts while the database is down, want %d", n, half)
	}
	proxy.Resume()
	ledger.Report(t, "redis database down", ids, e.settled(t, drillMessages))
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
	pool := newPool(t)
	ledger := drill.NewLedger(t, pool, testConsumer)
	e := newEnv(t, addr)
	start(t, newClient(t, pool), e.config(newRedis(t, addr), testlog.Errors(t)))

	e.add(t, "evt-1", `{"orderId":"o-1","total":"10.00"}`)
	drill.Eventually(t, 20*time.Second, "the original acknowledged", func() bool { return e.unsettled(t) == 0 })
	id, before := receiptRow(t, pool, "evt-1")

	changed := e.add(t, "evt-1", `{"orderId":"o-1","total":"99.00"}`)
	drill.Eventually(t, 20*time.Second, "the dead letter", func() bool { return len(e.deadLetters(t)) == 1 })
	dl := e.deadLetters(t)[0].Values
	if dl[redisstream.FieldReason] != redisstream.ReasonConflict || dl[redisstream.FieldReceipt] != id || dl[redisstream.FieldEntryID] != changed {
		t.Fatalf("dead letter %v, want reason conflict, receipt %s, entry %s", dl, id, changed)
	}
	if msg := fmt.Sprint(dl[redisstream.FieldError]); !strings.Contains(msg, "IDENTITY_CONFLICT") || !strings.Contains(msg, "evt-1") {
		t.Fatalf("dead letter error %q", msg)
	}
	if !strings.Contains(fmt.Sprint(dl["payload"]), `"99.00"`) {
		t.Fatalf("dead letter is not the changed entry: %v", dl)
	}
	drill.Eventually(t, 10*time.Second, "the changed entry acknowledged", func() bool { return e.unsettled(t) == 0 })
	if _, after := receiptRow(t, pool, "evt-1"); after != before {
		t.Fatalf("receipt changed:\nbefore %s\nafter  %s", before, after)
	}
	ledger.Report(t, "redis changed redelivery (1 of 2 dead-lettered)", []string{"evt-1"}, 1)
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

// After MaxDeliveries deliveries without an accept (here: the database is
// down) an entry moves to the dead-letter stream with the last error.
func TestMaxDeliveriesDeadLetter(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	dsn := testDSN(t)
	proxy, proxied := drill.ProxiedPool(t, dsn)
	e := newEnv(t, addr)
	cfg := e.config(newRedis(t, addr), testlog.Errors(t))
	cfg.MaxDeliveries = 3
	start(t, newClient(t, proxied), cfg)
	proxy.Refuse()

	for _, id := range drillIDs(3) {
		e.add(t, id, `{"orderId":"o"}`)
	}
	drill.Eventually(t, 30*time.Second, "three dead letters", func() bool { return len(e.deadLetters(t)) == 3 })
	for _, dl := range e.deadLetters(t) {
		v := dl.Values
		msg := fmt.Sprint(v[redisstream.FieldError])
		if v[redisstream.FieldReason] != redisstream.ReasonDeliveryLimit ||
			!strings.Contains(msg, "not accepted after 3 deliveries") ||
			!strings.Contains(msg, "last error: pginbox: accept") ||
			v[redisstream.FieldDeliveries] != "4" {
			t.Errorf("dead letter %v", v)
		}
	}
	if n := e.unsettled(t); n != 0 {
		t.Fatalf("%d entries unacknowledged after dead-lettering", n)
	}
	proxy.Resume()
	if n := receipts(t, drill.Pool(t, dsn, nil)); n != 0 {
		t.Fatalf("%d receipts, want none", n)
	}
}
