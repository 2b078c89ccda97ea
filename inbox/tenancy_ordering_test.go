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

// Under row-level security (the application role accepts and runs the
// handlers, the system pool claims), keyed accepts of two tenants, single
// and batched across both scopes, and the promotions in the handlers'
// transactions keep each key in order.
func TestOrderingKeyUnderTenancy(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	td := newTenancyDB(t)
	reg := orderedRegistry(t, td.owner, nil)
	_, err := td.owner.Exec(ctx, fmt.Sprintf("GRANT SELECT, INSERT ON handled TO %[1]s; GRANT USAGE ON SEQUENCE handled_seq_seq TO %[1]s", td.appRole))
	is.NoErr(err)
	c := newClient(t, td.app, inbox.Config{})
	a, b := inbox.Tenant("a"), inbox.Tenant("b")
	const perKey = 6
	for n := 1; n <= perKey; n += 2 {
		_, err := c.Accept(ctx, orderedMsg(a, "a/x", n))
		is.NoErr(err)
		_, err = c.Accept(ctx, orderedMsg(a, "a/x", n+1))
		is.NoErr(err)
		items, err := c.AcceptBatch(ctx, []inbox.Message{
			orderedMsg(b, "b/y", n), orderedMsg(a, "a/y", n), orderedMsg(b, "b/y", n+1), orderedMsg(a, "a/y", n+1)})
		is.NoErr(err)
		for _, it := range items {
			is.Equal(it.Outcome, inbox.Accepted)
		}
	}
	w := newWorker(t, td.app, reg, inbox.WorkerConfig{SystemPool: td.sys, Concurrency: 4, MessagesPerTx: 3,
		PollInterval: 20 * time.Millisecond})
	startWorker(t, w)
	testkit.Eventually(t, 30*time.Second, func() bool {
		return td.allCount(t, "pginbox_receipts", "status = 'COMPLETED'") == 3*perKey
	}, "every message handled")
	got := handledOrder(t, td.owner)
	is.Equal(len(got), 3)
	for k, ns := range got {
		if fmt.Sprint(ns) != fmt.Sprint(seq(1, perKey)) {
			t.Errorf("key %s handled in order %v", k, ns)
		}
	}
}
