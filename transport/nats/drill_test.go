package nats_test

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
	pgnats "github.com/pginbox/pginbox/transport/nats"
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

// publishAll publishes every id from a goroutine; the channel yields nil once
// the stream acknowledged them all.
func (e *env) publishAll(ids []string) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i, id := range ids {
			if err := e.tryPublish(id, fmt.Sprintf(`{"orderId":"o-%d","n":%d}`, i, i)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// settled waits until the durable has acked or terminated everything and
// returns how many messages it acked (stream messages minus dead letters).
func (e *env) settled(t testing.TB, sent int) int64 {
	t.Helper()
	drill.Eventually(t, 60*time.Second, "every message settled", func() bool { return e.unsettled(t) == 0 })
	return int64(sent - len(e.deadLetters(t)))
}

// The broker crashes (SIGKILL) twice in the middle of a stream and comes
// back on the same port and storage.
func TestDrillServerRestart(t *testing.T) {
	t.Parallel()
	srv := startPrivateServer(t)
	pool := newPool(t)
	ledger := drill.NewLedger(t, pool, testConsumer)
	e := newEnv(t, srv.url(), true)
	start(t, newClient(t, pool), e.config(srv.url(), testlog.Errors(t)))

	ids := drillIDs(drillMessages)
	published := e.publishAll(ids)
	for _, at := range []int{drillMessages / 3, 2 * drillMessages / 3} {
		drill.Eventually(t, 60*time.Second, fmt.Sprintf("%d receipts", at), func() bool { return ledger.Receipts(t) >= at })
		srv.kill(t)
		time.Sleep(300 * time.Millisecond)
		srv.start(t)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	ledger.Report(t, "nats server restart", ids, e.settled(t, drillMessages))
}

// The consumer's connection to the broker is cut repeatedly, and refused for
// a while, in the middle of a stream (a TCP proxy between the two).
func TestDrillConnectionCut(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	proxy, err := faultproxy.New("tcp", strings.TrimPrefix(url, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	pool := newPool(t)
	ledger := drill.NewLedger(t, pool, testConsumer)
	e := newEnv(t, url, true)
	start(t, newClient(t, pool), e.config("nats://"+proxy.Addr(), testlog.Errors(t)))

	ids := drillIDs(drillMessages)
	published := e.publishAll(ids)
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
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	acked := e.settled(t, drillMessages)
	if cuts < 3 {
		t.Fatalf("only %d connections cut", cuts)
	}
	ledger.Report(t, "nats connection cut", ids, acked)
}

// PostgreSQL is unreachable for a while: the consumer acks nothing, the
// broker redelivers, and after the database returns everything is applied
// once.
func TestDrillDatabaseDown(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	dsn := testDSN(t)
	direct := drill.Pool(t, dsn, nil)
	ledger := drill.NewLedger(t, direct, testConsumer)
	proxy, proxied := drill.ProxiedPool(t, dsn)
	e := newEnv(t, url, true)
	cfg := e.config(url, testlog.Errors(t))
	cfg.MaxDeliver = 1000 // this drill is about riding out the outage, not about exhaustion
	start(t, newClient(t, proxied), cfg)

	ids := drillIDs(drillMessages)
	const half = drillMessages / 2
	for i, id := range ids[:half] {
		e.publish(t, id, fmt.Sprintf(`{"orderId":"o-%d"}`, i))
	}
	drill.Eventually(t, 60*time.Second, "the first half settled", func() bool { return e.unsettled(t) == 0 })

	proxy.Refuse()
	proxy.Cut()
	for i, id := range ids[half:] {
		e.publish(t, id, fmt.Sprintf(`{"orderId":"o-%d"}`, half+i))
	}
	drill.Eventually(t, 30*time.Second, "redeliveries while the database is down", func() bool {
		return e.consumerInfo(t).NumRedelivered >= 10
	})
	if n := e.unsettled(t); n != drillMessages-half {
		t.Fatalf("%d unsettled while the database is down, want %d: something was acked without an accept", n, drillMessages-half)
	}
	if n := ledger.Receipts(t); n != half {
		t.Fatalf("%d receipts while the database is down, want %d", n, half)
	}
	proxy.Resume()
	ledger.Report(t, "nats database down", ids, e.settled(t, drillMessages))
}

// A changed redelivery (same event ID, different content) ends under the
// dead-letter subject with the conflict reason; the stored receipt is
// unchanged.
func TestDrillChangedRedelivery(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	pool := newPool(t)
	ledger := drill.NewLedger(t, pool, testConsumer)
	e := newEnv(t, url, true)
	cfg := e.config(url, testlog.Errors(t))
	cfg.Decode = decodeByEventID
	start(t, newClient(t, pool), cfg)

	e.publish(t, "pub-1", `{"eventId":"evt-1","orderId":"o-1","total":"10.00"}`)
	drill.Eventually(t, 20*time.Second, "the original acked", func() bool { return e.unsettled(t) == 0 })
	id, before := receiptRow(t, pool, "evt-1")

	e.publish(t, "pub-2", `{"eventId":"evt-1","orderId":"o-1","total":"99.00"}`)
	drill.Eventually(t, 20*time.Second, "the dead letter", func() bool { return len(e.deadLetters(t)) == 1 })
	dl := e.deadLetters(t)[0]
	if dl.Header.Get(pgnats.HeaderReason) != pgnats.ReasonConflict || dl.Header.Get(pgnats.HeaderReceipt) != id {
		t.Fatalf("dead letter headers %v, want reason conflict and receipt %s", dl.Header, id)
	}
	if msg := dl.Header.Get(pgnats.HeaderError); !strings.Contains(msg, "IDENTITY_CONFLICT") || !strings.Contains(msg, "evt-1") {
		t.Fatalf("dead letter error %q", msg)
	}
	if !strings.Contains(string(dl.Data), `"99.00"`) || dl.Header.Get(pgnats.HeaderMsgID) != "pub-2" {
		t.Fatalf("dead letter is not the changed message: %s %v", dl.Data, dl.Header)
	}
	drill.Eventually(t, 10*time.Second, "the changed message terminated", func() bool { return e.unsettled(t) == 0 })
	if _, after := receiptRow(t, pool, "evt-1"); after != before {
		t.Fatalf("receipt changed:\nbefore %s\nafter  %s", before, after)
	}
	ledger.Report(t, "nats changed redelivery (1 of 2 dead-lettered)", []string{"evt-1"}, 1)
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

// When MaxDeliver deliveries fail (here: the database is down), the server's
// advisory makes the consumer move the message to the dead-letter subject
// with the last error.
func TestMaxDeliveriesDeadLetter(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	dsn := testDSN(t)
	proxy, proxied := drill.ProxiedPool(t, dsn)
	e := newEnv(t, url, true)
	cfg := e.config(url, testlog.Errors(t))
	cfg.MaxDeliver = 3
	start(t, newClient(t, proxied), cfg)
	proxy.Refuse()

	for _, id := range drillIDs(3) {
		e.publish(t, id, `{"orderId":"o"}`)
	}
	drill.Eventually(t, 30*time.Second, "three dead letters", func() bool { return len(e.deadLetters(t)) == 3 })
	for _, dl := range e.deadLetters(t) {
		msg := dl.Header.Get(pgnats.HeaderError)
		if dl.Header.Get(pgnats.HeaderReason) != pgnats.ReasonDeliveryLimit ||
			!strings.Contains(msg, "not accepted after 3 deliveries") ||
			!strings.Contains(msg, "last error: pginbox: accept") ||
			dl.Header.Get(pgnats.HeaderDeliveries) != "3" {
			t.Errorf("dead letter %s: %v", dl.Header.Get(pgnats.HeaderMsgID), dl.Header)
		}
	}
	proxy.Resume()
	if n := receipts(t, drill.Pool(t, dsn, nil)); n != 0 {
		t.Fatalf("%d receipts, want none", n)
	}
}
