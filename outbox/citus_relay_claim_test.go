package outbox_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/citustest"
	"github.com/pginbox/pginbox/outbox"
)

// On Citus the relay's discovery reads (its claim's and lease recovery's)
// run over the one connection per worker node that each coordinator session
// keeps, instead of Citus opening more per node for their shard reads and
// closing them after (a new server process per discovery). Slow start off
// makes Citus open a connection per pending shard read at once.
func TestCitusRelayDiscoveryOpensNoConnections(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const poolSize = 4
	pool, conns := citustest.CountingPool(t, inboxtest.CitusDatabase(t), poolSize)
	const events = 32
	for i := range events {
		emitAs(t, pool, fmt.Sprintf("tenant-%02d", i%16), event("", i))
	}
	before := conns.Opened(t)
	r := newRelay(t, pool, &recorder{}, outbox.RelayConfig{BatchSize: 2})
	if n := drain(t, r); n != events {
		t.Fatalf("the relay published %d events, want %d", n, events)
	}
	for range 10 {
		if _, err := r.RecoverExpired(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got, most := conns.Opened(t)-before, int64(poolSize*conns.Workers); got > most {
		t.Errorf("the relay opened %d connections to the worker nodes, want at most %d (one per pool connection and node)", got, most)
	}
}

// On Citus a scope's claim is one command on the scope's node, committed
// there on its own: no BEGIN, transaction id and COMMIT around it.
func TestCitusRelayClaimIsOneCommandOnTheNode(t *testing.T) {
	t.Parallel()
	pool, rc := citusPool(t, inboxtest.CitusDatabase(t))
	for i := range 8 {
		emitAs(t, pool, fmt.Sprintf("tenant-%d", i%4), event("", i))
	}
	r := newRelay(t, pool, &recorder{}, outbox.RelayConfig{})
	rc.Reset()
	if n := drain(t, r); n != 8 {
		t.Fatalf("the relay published %d events, want 8", n)
	}
	lines := rc.Lines()
	claims := 0
	for i, l := range lines {
		if !strings.Contains(l, "SKIP LOCKED") {
			continue
		}
		claims++
		if i > 0 && strings.Contains(lines[i-1], "assign_distributed_transaction_id") {
			t.Errorf("the claim ran in a transaction Citus began on the node: %s, then %s", lines[i-1], l)
		}
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "COMMIT") {
			t.Errorf("a COMMIT followed the claim: %s", lines[i+1])
		}
	}
	if claims == 0 {
		t.Fatalf("no claim in the %d commands logged: the test proved nothing", len(lines))
	}
}
