package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/citustest"
	"github.com/pginbox/pginbox/outbox"
)

// On Citus the relay's discovery reads (its claim's, lease recovery's and
// its maintenance purge's) run over the one connection per worker node that each coordinator session
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
	purged := int64(0)
	for range 10 { // the first deletes the published events, all list the scopes
		n, err := outbox.PurgeBefore(ctx, r, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		purged += n
	}
	if purged != events {
		t.Fatalf("the relay's purge deleted %d published events, want %d", purged, events)
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

// On Citus the read that lists the scopes with due events groups every due
// event, so with a deep backlog it cost more than the claims it fed, and
// every batch read it again. The batches after a read now reuse it for a
// few times its cost: here, with 60,000 due events, far fewer reads than
// batches.
func TestCitusRelayListingServesSeveralBatches(t *testing.T) {
	t.Parallel()
	pool := poolOn(t, inboxtest.CitusDatabase(t))
	const events, tenants = 60_000, 64
	for start := 0; start < events; start += 20_000 {
		rows := make([][]any, 20_000)
		for i := range rows {
			n := start + i
			rows[i] = []any{inboxtype.New(), "tenant", fmt.Sprintf("tenant-%02d", n%tenants), "orders", "billing.v1",
				"order.confirmed", int32(1), fmt.Sprintf(`{"n":%d}`, n), "{}"}
		}
		if _, err := pool.CopyFrom(t.Context(), pgx.Identifier{"pginbox_outbox"},
			[]string{"id", "scope_kind", "scope_id", "source", "destination", "event_type", "schema_version", "payload", "metadata"},
			pgx.CopyFromRows(rows)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(t.Context(), "VACUUM ANALYZE pginbox_outbox"); err != nil {
		t.Fatal(err)
	}
	r := newRelay(t, pool, &recorder{}, outbox.RelayConfig{})
	var listings, batches atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	outbox.SetListed(r, func(int) { listings.Add(1) })
	outbox.SetAfterPublish(r, func([]outbox.ID) {
		if batches.Add(1) == 30 {
			cancel()
		}
	})
	if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	l, b := listings.Load(), batches.Load()
	t.Logf("%d listing reads for %d batches", l, b)
	if l*4 > b*3 {
		t.Fatalf("%d listing reads for %d batches: each read should serve several batches", l, b)
	}
}
