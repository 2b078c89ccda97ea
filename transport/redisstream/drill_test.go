package redisstream_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/redisstream"
)

// The failure drills every adapter owes are in the conformance suite
// (conformance_test.go); what stays here is Redis's own.

func drillIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("drill-%04d", i)
	}
	return ids
}

// After DeliveryLimit deliveries without an accept (here: the database is
// down) an entry moves to the dead-letter stream with the last error.
func TestDeliveryLimitDeadLetter(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	dsn := testDSN(t)
	proxy, proxied := drill.ProxiedPool(t, dsn)
	e := newEnv(t, addr)
	cfg := e.config(newRedis(t, addr), testlog.Errors(t))
	cfg.DeliveryLimit = 3
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
