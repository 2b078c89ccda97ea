package inbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/testkit"
)

// A worker whose claims fail claims again at the poll, not on each
// notification: accepts keep notifying while the database refuses the
// worker, and one claim per notification would be a busy loop. Once the
// claims succeed again, the poll brings every message in.
func TestWorkerFailedClaimWaitsForPoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner, dsn := newPool(t)
	role := "pginbox_t_noclaim_" + strings.ToLower(inboxtype.New().String())
	createRole(t, owner, role, true)
	// Every claim fails: claims update pginbox_work.
	if _, err := owner.Exec(ctx, "REVOKE UPDATE ON pginbox_work FROM "+role); err != nil {
		t.Fatal(err)
	}
	sys := poolFor(t, dsn, func(c *pgxpool.Config) { c.ConnConfig.User = role })

	log, rec := newLogRecorder(t)
	const poll = 500 * time.Millisecond
	w := newWorker(t, sys, registry(t, func(context.Context, *handler.Msg) error { return nil }),
		inbox.WorkerConfig{Logger: log, PollInterval: poll})
	startWorker(t, w)

	client := newClient(t, owner, inbox.Config{})
	const accepts = 100
	start := time.Now()
	for i := range accepts {
		acceptAll(t, client, orderMsg(fmt.Sprintf("m-%d", i), map[string]int{"n": i}))
		time.Sleep(15 * time.Millisecond) // pacing the accepts: their notifications span several polls
	}
	elapsed := time.Since(start)
	failed := rec.count("pginbox worker: claim failed")
	// The first claim, one per poll, and one in flight when the clock stopped.
	if limit := int(elapsed/poll) + 3; failed < 1 || failed > limit {
		t.Fatalf("%d failed claims during %v of accepts (%d notifications), want 1..%d: one per poll interval (%v)",
			failed, elapsed.Round(time.Millisecond), accepts, limit, poll)
	}

	if _, err := owner.Exec(ctx, "GRANT UPDATE ON pginbox_work TO "+role); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		return countRows(t, owner, "status = 'COMPLETED'") == accepts
	}, "every message completed after the grant")
}
