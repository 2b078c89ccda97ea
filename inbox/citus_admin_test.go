package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/testkit"
)

// On Citus the operator's view (every scope) requeues, replays and purges:
// the change reads the receipt's scope without a lock and then locks and
// changes it with statements routed to the scope's node (Citus refuses a lock
// across shards); the purge goes scope by scope. Receipts of two tenants and
// of the global scope, which live on different shards.
func TestCitusOperatorAdmin(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, rc := citusPool(t)
	reg := handler.NewRegistry()
	is.NoErr(reg.Register(handler.Key{Consumer: "c", EventType: "e", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			if strings.HasPrefix(m.MessageID, "bad") {
				return handler.Permanent(errors.New("bad message"))
			}
			return nil
		}))
	client, err := inbox.NewClient(pool, inbox.Config{})
	is.NoErr(err)
	scopes := []inbox.Scope{inbox.Tenant("tenant-x"), inbox.Tenant("tenant-y"), inbox.Global()}
	ids := map[string]inbox.ID{} // by scope and message ID
	for _, s := range scopes {
		for _, m := range []string{"good", "bad"} {
			res, err := client.Accept(ctx, inbox.Message{
				Identity:  inbox.Identity{Scope: s, Source: "s", Consumer: "c", MessageID: m},
				EventType: "e", SchemaVersion: 1, Payload: map[string]any{"m": m},
			})
			is.NoErr(err)
			ids[s.String()+"/"+m] = res.ID
		}
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{"c"}, Logger: slog.New(slog.DiscardHandler)})
	is.NoErr(err)
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 6)

	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: slog.New(slog.DiscardHandler)})
	is.NoErr(err)
	ops := admin.Operator()
	change := func(version int64) inbox.ChangeParams {
		return inbox.ChangeParams{ExpectedVersion: version, Actor: "ops", Reason: "test"}
	}

	for _, s := range scopes {
		// Requeue a DEAD receipt of each scope.
		dead := ids[s.String()+"/bad"]
		got, err := ops.Get(ctx, dead)
		is.NoErr(err)
		is.Equal(got.Status, inbox.StatusDead)
		rc.Reset()
		rq, err := ops.Requeue(ctx, dead, change(got.Version))
		is.NoErr(err)
		is.Equal(rq.FromStatus, inbox.StatusDead)
		// The locks went to the scope's node alone.
		port := fmt.Sprintf("127.0.0.1:%d ", nodeOf(t, pool, "pginbox_receipts", s.ID))
		locks := rc.Matching("FOR UPDATE")
		is.True(len(locks) > 0) // the log captured the lock
		for _, l := range locks {
			if !strings.Contains(l, port) {
				t.Errorf("%s: a lock went to another node than the scope's (%s): %s", s, port, l)
			}
		}
		// A second requeue with the old version is a conflict, not a change.
		_, err = ops.Requeue(ctx, dead, change(got.Version))
		var vc *inbox.VersionConflictError
		is.True(errors.As(err, &vc))

		// Replay a COMPLETED receipt of each scope.
		done := ids[s.String()+"/good"]
		got, err = ops.Get(ctx, done)
		is.NoErr(err)
		is.Equal(got.Status, inbox.StatusCompleted)
		rp, err := ops.Replay(ctx, done, change(got.Version))
		is.NoErr(err)
		replay, err := ops.Get(ctx, rp.NewID)
		is.NoErr(err)
		is.Equal(replay.Status, inbox.StatusPending)
		is.Equal(replay.ReplayOf, done)
		is.Equal(replay.Scope, s) // the copy stays in the original's scope
		_, err = ops.Replay(ctx, done, change(got.Version))
		is.True(errors.As(err, &vc))
	}
	// The requeued ones fail again (the handler still refuses them); the
	// replays complete.
	n, err = w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 6)

	// Purge every scope: the originals and their replays, 2 per scope.
	before := time.Now()
	count, _, err := ops.PurgeCount(ctx, inbox.PurgeParams{Before: before})
	is.NoErr(err)
	is.Equal(count, int64(6))
	var progress int
	res, err := ops.Purge(ctx, inbox.PurgeParams{Before: before, BatchSize: 1, Progress: func(inbox.PurgeResult) { progress++ }})
	is.NoErr(err)
	is.Equal(res.Purged, int64(6))
	is.Equal(res.Batches, 6)
	is.Equal(progress, 6)
	for _, s := range scopes {
		got, err := ops.Get(ctx, ids[s.String()+"/good"])
		is.NoErr(err)
		is.True(got.Purged())
		_, err = ops.Replay(ctx, got.ID, change(got.Version))
		var pe *inbox.PayloadPurgedError
		is.True(errors.As(err, &pe))
	}
	res, err = ops.Purge(ctx, inbox.PurgeParams{Before: time.Now()})
	is.NoErr(err)
	is.Equal(res.Purged, int64(0)) // nothing left
}

// On Citus a tenant's view purges its own scope only, routed to its node.
func TestCitusTenantPurge(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := citusPool(t)
	reg := handler.NewRegistry()
	is.NoErr(reg.Register(handler.Key{Consumer: "c", EventType: "e", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error { return nil }))
	client, err := inbox.NewClient(pool, inbox.Config{})
	is.NoErr(err)
	for _, tenant := range []string{"tenant-p", "tenant-q"} {
		for i := range 3 {
			_, err := client.Accept(ctx, inbox.Message{
				Identity:  inbox.Identity{Scope: inbox.Tenant(tenant), Source: "s", Consumer: "c", MessageID: fmt.Sprint(i)},
				EventType: "e", SchemaVersion: 1, Payload: map[string]any{},
			})
			is.NoErr(err)
		}
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{"c"}, Logger: slog.New(slog.DiscardHandler)})
	is.NoErr(err)
	_, err = w.Drain(ctx)
	is.NoErr(err)
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: slog.New(slog.DiscardHandler)})
	is.NoErr(err)
	res, err := admin.ForTenant("tenant-p").Purge(ctx, inbox.PurgeParams{Before: time.Now(), BatchSize: 2})
	is.NoErr(err)
	is.Equal(res.Purged, int64(3))
	left, _, err := admin.Operator().PurgeCount(ctx, inbox.PurgeParams{Before: time.Now()})
	is.NoErr(err)
	is.Equal(left, int64(3)) // tenant-q's
}

// On Citus a retryable failure is retried on the scope's node until it
// succeeds, or until its attempts run out (DEAD); the operator then requeues
// it with a fresh budget.
func TestCitusRetriesThenDead(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := citusPool(t)
	var mu sync.Mutex
	calls := map[string]int{}
	reg := handler.NewRegistry()
	is.NoErr(reg.Register(handler.Key{Consumer: "c", EventType: "e", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			mu.Lock()
			defer mu.Unlock()
			calls[m.MessageID]++
			if m.MessageID == "hopeless" || calls[m.MessageID] < 2 {
				return errors.New("try again")
			}
			return nil
		}))
	client, err := inbox.NewClient(pool, inbox.Config{MaxAttempts: 3})
	is.NoErr(err)
	ids := map[string]inbox.ID{}
	for _, m := range []string{"flaky", "hopeless"} {
		res, err := client.Accept(ctx, inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant("tenant-retry"), Source: "s", Consumer: "c", MessageID: m},
			EventType: "e", SchemaVersion: 1, Payload: map[string]any{},
		})
		is.NoErr(err)
		ids[m] = res.ID
	}
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{"c"}, Logger: slog.New(slog.DiscardHandler),
		Backoff: func(int) time.Duration { return time.Millisecond }})
	is.NoErr(err)
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: slog.New(slog.DiscardHandler)})
	is.NoErr(err)
	ops := admin.Operator()
	status := func(m string) *inbox.ReceiptDetails {
		got, err := ops.Get(ctx, ids[m])
		is.NoErr(err)
		return got
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		_, err := w.Drain(ctx) // due again after the 1ms backoff
		is.NoErr(err)
		return status("hopeless").Status == inbox.StatusDead && status("flaky").Status == inbox.StatusCompleted
	}, "flaky COMPLETED and hopeless DEAD; saw %v", testkit.Lazy(func() string {
		return fmt.Sprintf("flaky %s, hopeless %s", status("flaky").Status, status("hopeless").Status)
	}))
	mu.Lock()
	is.Equal(calls["flaky"], 2)
	is.Equal(calls["hopeless"], 3) // MaxAttempts
	mu.Unlock()
	got := status("hopeless")
	is.Equal(got.Attempts, 3)
	_, err = ops.Requeue(ctx, got.ID, inbox.ChangeParams{ExpectedVersion: got.Version, Actor: "ops", Reason: "again"})
	is.NoErr(err)
	got = status("hopeless")
	is.Equal(got.Status, inbox.StatusPending)
	is.Equal(got.Attempts, 0) // a fresh budget
}

// On Citus a receipt left claimed by a crashed worker (lease expired) is
// recovered by the per-scope lease recovery and completed by another worker,
// which spends one more attempt.
func TestCitusCrashRecovery(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := citusPool(t)
	msg := orderMsg("crashed", map[string]int{"n": 1})
	msg.Scope = inbox.Tenant("tenant-crash")
	ids := acceptAll(t, newClient(t, pool, inbox.Config{}), msg)
	// As a crashed worker leaves it: claimed, lease in the past (the values
	// are parameters: Citus routes the update with them).
	tag, err := pool.Exec(ctx, `UPDATE pginbox_work SET status = 'PROCESSING', attempts = 1, claim_token = $2,
		lease_expires_at = $3 WHERE scope_id = 'tenant-crash' AND receipt_id = $1`,
		ids[0], inboxtype.New(), time.Now().Add(-time.Second))
	is.NoErr(err)
	is.Equal(tag.RowsAffected(), int64(1))

	var ran atomic.Int32
	startWorker(t, newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		ran.Add(1)
		return nil
	}), inbox.WorkerConfig{Lease: time.Second, RecoverInterval: 100 * time.Millisecond}))
	st := waitStatus(t, pool, ids[0], "COMPLETED", 20*time.Second)
	is.Equal(st.Attempts, 2)
	is.Equal(ran.Load(), int32(1))
}
