package inbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
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
	eventually(t, 60*time.Second, "every message handled", func() bool {
		return countRows(t, pool, "status = 'COMPLETED'") == 4*perKey
	})
	got := handledOrder(t, pool)
	is.Equal(len(got), 4)
	for k, ns := range got {
		if fmt.Sprint(ns) != fmt.Sprint(seq(1, perKey)) {
			t.Errorf("key %s handled in order %v", k, ns)
		}
	}
}
