package historycheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/testkit"
)

// A call the histories leave out as never sent (notSent) must not have
// committed. Operators requeue fresh DEAD receipts through the proxy while
// it cuts every connection every 50 to 250 ms; for each requeue that
// notSent calls unsent, the receipt must have no audit row. (pgx reports a
// connection whose read failed after the request went out as "conn closed",
// which it calls safe to retry: a COMMIT lost that way had committed, and
// the worker history found a requeue missing from its history.)
func TestNotSentCallsDidNotCommit(t *testing.T) {
	pool, direct, proxy := proxiedPools(t)
	ctx := t.Context()
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
	if err != nil {
		t.Fatal(err)
	}
	view := admin.Operator()
	runCtx, stop := context.WithTimeout(ctx, time.Duration(historySeconds())*time.Second)
	defer stop()
	var wg sync.WaitGroup
	cuts := 0
	wg.Go(func() {
		for testkit.Pace(runCtx, time.Duration(50+rand.IntN(200))*time.Millisecond) {
			if proxy.Cut() > 0 {
				cuts++
			}
		}
	})
	calls, failed, unsent := 0, 0, 0
	for ; runCtx.Err() == nil; calls++ {
		ids, _ := seedReceipts(t, ctx, direct, []string{fmt.Sprint("c", calls)}, 3)
		id := ids[0]
		inboxtest.SetState(t, direct, id, "status = 'DEAD'")
		_, err := view.Requeue(ctx, id, inbox.ChangeParams{ExpectedVersion: 1, Actor: "history", Reason: "not sent"})
		if err != nil {
			failed++
		}
		if !notSent(err) {
			continue
		}
		unsent++
		var audits int
		if err := direct.QueryRow(ctx, `SELECT count(*) FROM pginbox_audit WHERE receipt_id = $1`, id).Scan(&audits); err != nil {
			t.Fatal(err)
		}
		if audits > 0 {
			t.Fatalf("a requeue that failed with %q, which notSent calls never sent, committed", err)
		}
	}
	wg.Wait()
	t.Logf("%d requeues, %d cuts, %d failed, %d of them before reaching the server, none of those committed", calls, cuts, failed, unsent)
	if cuts == 0 || failed == 0 {
		t.Errorf("%d cuts and %d failed calls: the run checked nothing", cuts, failed)
	}
}
