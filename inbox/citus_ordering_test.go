package inbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/testkit"
)

// On Citus, keyed accepts (single and batched, two tenants on their nodes)
// and the promotions at completion keep each key in accept order.
func TestCitusOrderingKeyOrder(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := citusPool(t)
	c := newClient(t, pool, inbox.Config{})
	reg := orderedRegistry(t, pool, nil)
	const perKey = 8
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		for n := 1; n <= perKey; n += 2 {
			// Key x one by one, key y in batches of two.
			for j := n; j < n+2; j++ {
				_, err := c.Accept(ctx, orderedMsg(inbox.Tenant(tenant), tenant+"/x", j))
				is.NoErr(err)
			}
			items, err := c.AcceptBatch(ctx, []inbox.Message{
				orderedMsg(inbox.Tenant(tenant), tenant+"/y", n), orderedMsg(inbox.Tenant(tenant), tenant+"/y", n+1)})
			is.NoErr(err)
			for _, it := range items {
				is.Equal(it.Outcome, inbox.Accepted)
			}
		}
	}
	w := newWorker(t, pool, reg, inbox.WorkerConfig{Concurrency: 2, MessagesPerTx: 2, PollInterval: 20 * time.Millisecond})
	startWorker(t, w)
	testkit.Eventually(t, 60*time.Second, func() bool {
		return countRows(t, pool, "status = 'COMPLETED'") == 4*perKey
	}, "every message handled")
	got := handledOrder(t, pool)
	is.Equal(len(got), 4)
	for k, ns := range got {
		if fmt.Sprint(ns) != fmt.Sprint(seq(1, perKey)) {
			t.Errorf("key %s handled in order %v", k, ns)
		}
	}
}

// On Citus under row-level security (the application role accepts and runs
// the handlers, the system pool claims): keyed accepts, single, batched
// across two tenants and in a caller's transaction, keep each key in order.
func TestCitusOrderingKeyUnderTenancy(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	d := newCitusTenancy(t)
	reg := orderedRegistry(t, d.owner, nil)
	var role string
	is.NoErr(d.app.QueryRow(ctx, "SELECT current_user").Scan(&role))
	_, err := d.owner.Exec(ctx, fmt.Sprintf("GRANT SELECT, INSERT ON handled TO %[1]s; GRANT USAGE ON SEQUENCE handled_seq_seq TO %[1]s", role))
	is.NoErr(err)
	c := newClient(t, d.app, inbox.Config{})
	a, b := inbox.Tenant("tenant-a"), inbox.Tenant("tenant-b")
	const perKey = 6
	for n := 1; n <= perKey; n += 3 {
		_, err := c.Accept(ctx, orderedMsg(a, "a/x", n))
		is.NoErr(err)
		items, err := c.AcceptBatch(ctx, []inbox.Message{
			orderedMsg(b, "b/y", n), orderedMsg(a, "a/x", n+1), orderedMsg(b, "b/y", n+1)})
		is.NoErr(err)
		for _, it := range items {
			is.Equal(it.Outcome, inbox.Accepted)
		}
		tx, err := d.app.Begin(ctx)
		is.NoErr(err)
		_, err = c.AcceptTx(ctx, tx, orderedMsg(a, "a/x", n+2))
		is.NoErr(err)
		is.NoErr(tx.Commit(ctx))
		_, err = c.Accept(ctx, orderedMsg(b, "b/y", n+2))
		is.NoErr(err)
	}
	w := newWorker(t, d.app, reg, inbox.WorkerConfig{SystemPool: d.sys, Concurrency: 2, MessagesPerTx: 2,
		PollInterval: 20 * time.Millisecond})
	startWorker(t, w)
	testkit.Eventually(t, 60*time.Second, func() bool {
		return d.count(t, "pginbox_receipts", "status = 'COMPLETED' AND ordering_key IS NOT NULL") == 2*perKey
	}, "every message handled")
	got := handledOrder(t, d.owner) // the fixture's own unkeyed receipts run too
	for _, k := range []string{"a/x", "b/y"} {
		if fmt.Sprint(got[k]) != fmt.Sprint(seq(1, perKey)) {
			t.Errorf("key %s handled in order %v", k, got[k])
		}
	}
}
