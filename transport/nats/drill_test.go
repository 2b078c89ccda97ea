package nats_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	pgnats "github.com/pginbox/pginbox/transport/nats"
)

// The failure drills every adapter owes are in the conformance suite
// (conformance_test.go); what stays here is NATS's own.

func drillIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("drill-%04d", i)
	}
	return ids
}

// When DeliveryLimit deliveries fail (here: the database is down), the server's
// advisory makes the consumer move the message to the dead-letter subject
// with the last error.
func TestDeliveryLimitDeadLetter(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	dsn := testDSN(t)
	proxy, proxied := drill.ProxiedPool(t, dsn)
	e := newEnv(t, url, true)
	cfg := e.config(url, testlog.Errors(t))
	cfg.DeliveryLimit = 3
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
