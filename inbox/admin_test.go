package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func admNew(t testing.TB, pool *pgxpool.Pool) *inbox.Admin {
	a, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// admSet forces a receipt's state with SQL, as a fixture.
func admSet(t testing.TB, pool *pgxpool.Pool, id inbox.ID, set string, args ...any) {
	t.Helper()
	inboxtest.SetState(t, pool, id, set, args...)
}

func admAudit(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_audit").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func admAccept(t testing.TB, c *inbox.Client, msg inbox.Message) inbox.ID {
	t.Helper()
	res, err := c.Accept(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

func admTenantMsg(tenant, id string, payload any) inbox.Message {
	m := orderMsg(id, payload)
	m.Scope = inbox.Tenant(tenant)
	return m
}

func admChange(version int64) inbox.ChangeParams {
	return inbox.ChangeParams{ExpectedVersion: version, Actor: "alice", Reason: "fixed the projection bug"}
}

func TestAdminRequeueStaleVersionChangesNothing(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, dsn := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ops := admNew(t, pool).Operator()

	id := admAccept(t, c, orderMsg("evt-1", raw(`{"orderId":"o-1"}`)))
	admSet(t, pool, id, "status = 'DEAD', attempts = 10, version = 5, last_error = 'boom', available_at = now() - interval '1 hour'")
	before := rowSnapshot(t, pool, id)

	_, err := ops.Requeue(ctx, id, admChange(4))
	is.True(errors.Is(err, inbox.ErrVersionConflict))
	var vc *inbox.VersionConflictError
	is.True(errors.As(err, &vc))
	is.Equal(vc.Expected, int64(4))
	is.Equal(vc.Current, int64(5))
	is.Equal(rowSnapshot(t, pool, id), before) // nothing changed
	is.Equal(admAudit(t, pool), 0)             // and nothing audited

	// A listening worker is woken by the requeue, at commit.
	listener, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer listener.Close(ctx)
	_, err = listener.Exec(ctx, "LISTEN "+inbox.NotifyChannel)
	is.NoErr(err)

	res, err := ops.Requeue(ctx, id, admChange(5))
	is.NoErr(err)
	is.Equal(res.FromStatus, inbox.StatusDead)
	is.Equal(res.FromVersion, int64(5))
	is.Equal(res.Version, int64(6))

	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(wctx)
	is.NoErr(err)
	is.Equal(n.Payload, "orders.projection.v1")

	got, err := ops.Get(ctx, id)
	is.NoErr(err)
	is.Equal(got.Status, inbox.StatusPending)
	is.Equal(got.Attempts, 0) // fresh retry budget
	is.Equal(got.Version, int64(6))
	is.True(time.Since(got.AvailableAt) < time.Minute) // due now, not an hour ago
	is.Equal(len(got.Audit), 1)
	a := got.Audit[0]
	is.Equal(a.Action, inbox.AuditRequeue)
	is.Equal(a.Actor, "alice")
	is.Equal(a.Reason, "fixed the projection bug")
	is.Equal(a.FromStatus, inbox.StatusDead)
	is.Equal(a.ToStatus, inbox.StatusPending)
	is.Equal(a.FromVersion, int64(5))
	is.Equal(a.ToVersion, int64(6))
	is.True(a.NewReceiptID.IsZero())
	is.Equal(a.ID, res.AuditID)

	// The same stale decision a second time is a conflict, not a second requeue.
	_, err = ops.Requeue(ctx, id, admChange(5))
	is.True(errors.Is(err, inbox.ErrVersionConflict))
}

func TestAdminRequeueRefusals(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ops := admNew(t, pool).Operator()

	id := admAccept(t, c, orderMsg("evt-1", raw(`{}`)))
	admSet(t, pool, id, "status = 'COMPLETED', completed_at = now()")
	before := rowSnapshot(t, pool, id)

	_, err := ops.Requeue(ctx, id, admChange(1))
	is.True(errors.Is(err, inbox.ErrWrongState))
	var ws *inbox.WrongStateError
	is.True(errors.As(err, &ws))
	is.Equal(ws.Found, inbox.StatusCompleted)
	is.Equal(ws.Allowed, []inbox.Status{inbox.StatusDead, inbox.StatusRetryable})
	t.Log(err)

	_, err = ops.Requeue(ctx, inbox.ID{1, 2, 3}, admChange(1))
	is.True(errors.Is(err, inbox.ErrNotFound))

	_, err = ops.Requeue(ctx, id, inbox.ChangeParams{ExpectedVersion: 1, Actor: "alice"})
	is.True(errors.Is(err, inbox.ErrInvalid)) // a reason is required
	_, err = ops.Requeue(ctx, id, inbox.ChangeParams{ExpectedVersion: 1, Reason: "why"})
	is.True(errors.Is(err, inbox.ErrInvalid)) // an actor is required
	_, err = ops.Requeue(ctx, id, inbox.ChangeParams{Actor: "alice", Reason: "why"})
	is.True(errors.Is(err, inbox.ErrInvalid)) // a version is required

	is.Equal(rowSnapshot(t, pool, id), before)
	is.Equal(admAudit(t, pool), 0)

	// RETRYABLE may be requeued too (to skip the backoff wait).
	admSet(t, pool, id, "status = 'RETRYABLE', completed_at = NULL, attempts = 3, available_at = now() + interval '1 hour'")
	res, err := ops.Requeue(ctx, id, admChange(1))
	is.NoErr(err)
	is.Equal(res.FromStatus, inbox.StatusRetryable)
}

func TestAdminRequeueTxFollowsCallersTransaction(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ops := admNew(t, pool).Operator()

	id := admAccept(t, c, orderMsg("evt-1", raw(`{}`)))
	admSet(t, pool, id, "status = 'DEAD'")
	before := rowSnapshot(t, pool, id)

	tx, err := pool.Begin(ctx)
	is.NoErr(err)
	_, err = ops.RequeueTx(ctx, tx, id, admChange(1))
	is.NoErr(err)
	is.NoErr(tx.Rollback(ctx))
	is.Equal(rowSnapshot(t, pool, id), before)
	is.Equal(admAudit(t, pool), 0)

	// A refusal leaves the caller's transaction usable.
	tx, err = pool.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	_, err = ops.RequeueTx(ctx, tx, id, admChange(7))
	is.True(errors.Is(err, inbox.ErrVersionConflict))
	res, err := ops.RequeueTx(ctx, tx, id, admChange(1))
	is.NoErr(err)
	is.NoErr(tx.Commit(ctx))
	is.Equal(res.Version, int64(2))
	is.Equal(stateOf(t, pool, id).Status, "PENDING")
	is.Equal(admAudit(t, pool), 1)
}

func TestAdminRequeuedReceiptIsProcessed(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	setupBusiness(t, pool)
	c := newClient(t, pool, inbox.Config{})
	ops := admNew(t, pool).Operator()

	var fixed bool
	reg := registry(t, handler.Typed(handler.DecodeOptions{}, func(ctx context.Context, m *handler.Msg, p orderCreated) error {
		if !fixed {
			return handler.Permanent(errors.New("unsupported currency"))
		}
		return projectOrder(ctx, m, p)
	}))
	w := newWorker(t, pool, reg, inbox.WorkerConfig{})

	id := admAccept(t, c, orderMsg("evt-1", map[string]string{"orderId": "o-1"}))
	_, err := w.Drain(ctx)
	is.NoErr(err)
	dead, err := ops.Get(ctx, id)
	is.NoErr(err)
	is.Equal(dead.Status, inbox.StatusDead)
	is.Equal(dead.LastError, "unsupported currency")

	fixed = true
	_, err = ops.Requeue(ctx, id, admChange(dead.Version))
	is.NoErr(err)
	_, err = w.Drain(ctx)
	is.NoErr(err)
	done, err := ops.Get(ctx, id)
	is.NoErr(err)
	is.Equal(done.Status, inbox.StatusCompleted)
	is.Equal(done.Attempts, 1)
	is.Equal(businessRows(t, pool), 1)
}

func TestAdminConcurrentReplaysCreateOneReceipt(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ops := admNew(t, pool).Operator()

	msg := orderMsg("evt-1", raw(`{"orderId":"o-1","total":12.5}`))
	msg.Metadata = map[string]string{"traceparent": "00-abc-01"}
	orig := admAccept(t, c, msg)
	admSet(t, pool, orig, "status = 'COMPLETED', completed_at = now(), attempts = 1, version = 3")

	const replays = 20
	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		mu        sync.Mutex
		won       []*inbox.ReplayResult
		conflicts int
		other     []error
	)
	for range replays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := ops.Replay(ctx, orig, admChange(3))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, res)
			case errors.Is(err, inbox.ErrVersionConflict):
				conflicts++
			default:
				other = append(other, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	is.Equal(other, nil)
	is.Equal(len(won), 1)
	is.Equal(conflicts, replays-1)
	is.Equal(countRows(t, pool, "replay_of = $1", orig), 1)
	is.Equal(admAudit(t, pool), 1)

	newID := won[0].NewID
	is.Equal(won[0].OriginalVersion, int64(4))
	var fpSame, payloadSame, metadataSame bool
	is.NoErr(pool.QueryRow(ctx, `SELECT n.fingerprint = o.fingerprint, n.payload::text = o.payload::text, n.metadata = o.metadata
		FROM pginbox_receipts_live n JOIN pginbox_receipts_live o ON o.id = n.replay_of WHERE n.id = $1`, newID).
		Scan(&fpSame, &payloadSame, &metadataSame))
	is.True(fpSame && payloadSame && metadataSame)

	// The original keeps its status and content; only its version moved.
	o, err := ops.Get(ctx, orig)
	is.NoErr(err)
	is.Equal(o.Status, inbox.StatusCompleted)
	is.Equal(o.Version, int64(4))
	is.Equal(string(o.Payload), `{"orderId":"o-1","total":12.5}`)
	is.Equal(len(o.Replays), 1)
	is.Equal(o.Replays[0].ID, newID)
	is.Equal(o.Replays[0].Status, inbox.StatusPending)
	is.Equal(len(o.Audit), 1)
	is.Equal(o.Audit[0].Action, inbox.AuditReplay)
	is.Equal(o.Audit[0].NewReceiptID, newID)
	is.Equal(o.Audit[0].FromVersion, int64(3))
	is.Equal(o.Audit[0].ToVersion, int64(4))

	n, err := ops.Get(ctx, newID)
	is.NoErr(err)
	is.Equal(n.Status, inbox.StatusPending)
	is.Equal(n.ReplayOf, orig)
	is.True(n.IsReplay())
	is.Equal(n.Identity(), o.Identity())
	is.Equal(n.Attempts, 0)
	is.Equal(n.Metadata, map[string]string{"traceparent": "00-abc-01"})
	is.Equal(len(n.Audit), 1) // the replay that created it
	is.Equal(n.Audit[0].ID, o.Audit[0].ID)

	// A redelivery of the original message is still a duplicate of the original.
	dup, err := c.Accept(ctx, msg)
	is.NoErr(err)
	is.Equal(dup.Outcome, inbox.Duplicate)
	is.Equal(dup.ID, orig)
}

func TestAdminReplayRefusals(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ops := admNew(t, pool).Operator()

	id := admAccept(t, c, orderMsg("evt-1", raw(`{}`)))
	_, err := ops.Replay(ctx, id, admChange(1))
	var ws *inbox.WrongStateError
	is.True(errors.As(err, &ws))
	is.Equal(ws.Found, inbox.StatusPending)
	is.Equal(ws.Allowed, []inbox.Status{inbox.StatusCompleted})

	admSet(t, pool, id, "status = 'COMPLETED', completed_at = now() - interval '40 days'")
	_, err = ops.Purge(ctx, inbox.PurgeParams{OlderThan: 30 * 24 * time.Hour})
	is.NoErr(err)
	got, err := ops.Get(ctx, id)
	is.NoErr(err)
	before := rowSnapshot(t, pool, id)
	_, err = ops.Replay(ctx, id, admChange(got.Version))
	is.True(errors.Is(err, inbox.ErrPayloadPurged))
	t.Log(err)
	is.Equal(rowSnapshot(t, pool, id), before)
	is.Equal(countRows(t, pool, "true"), 1)
	is.Equal(admAudit(t, pool), 0)
}

func TestAdminPurgeKeepsDeduplication(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ops := admNew(t, pool).Operator()

	old := orderMsg("evt-old", raw(`{"orderId":"o-1","total":10}`))
	oldID := admAccept(t, c, old)
	recentID := admAccept(t, c, orderMsg("evt-recent", raw(`{"orderId":"o-2"}`)))
	deadID := admAccept(t, c, orderMsg("evt-dead", raw(`{"orderId":"o-3"}`)))
	admSet(t, pool, oldID, "status = 'COMPLETED', completed_at = now() - interval '31 days'")
	admSet(t, pool, recentID, "status = 'COMPLETED', completed_at = now() - interval '29 days'")
	admSet(t, pool, deadID, "status = 'DEAD', updated_at = now() - interval '90 days'")
	var fpBefore []byte
	is.NoErr(pool.QueryRow(ctx, "SELECT fingerprint FROM pginbox_receipts_live WHERE id = $1", oldID).Scan(&fpBefore))

	n, _, err := ops.PurgeCount(ctx, inbox.PurgeParams{OlderThan: 30 * 24 * time.Hour})
	is.NoErr(err)
	is.Equal(n, int64(1))
	res, err := ops.Purge(ctx, inbox.PurgeParams{OlderThan: 30 * 24 * time.Hour, BatchSize: 10})
	is.NoErr(err)
	is.Equal(res.Purged, int64(1))
	is.Equal(res.Batches, 1)

	got, err := ops.Get(ctx, oldID)
	is.NoErr(err)
	is.True(got.Purged())
	is.Equal(got.Payload, nil)
	is.Equal(got.Fingerprint, fpBefore)
	is.Equal(got.MessageID, "evt-old")
	is.Equal(countRows(t, pool, "payload IS NOT NULL"), 2) // recent and DEAD keep theirs

	// Same content after purge: still a duplicate. Changed content: still a conflict.
	dup, err := c.Accept(ctx, old)
	is.NoErr(err)
	is.Equal(dup.Outcome, inbox.Duplicate)
	is.Equal(dup.ID, oldID)
	is.Equal(dup.Status, inbox.StatusCompleted)

	changed := orderMsg("evt-old", raw(`{"orderId":"o-1","total":11}`))
	_, err = c.Accept(ctx, changed)
	is.True(errors.Is(err, inbox.ErrIdentityConflict))
	var ce *inbox.ConflictError
	is.True(errors.As(err, &ce))
	is.Equal(ce.ReceiptID, oldID)

	// Nothing left to purge: a second run is a no-op.
	res, err = ops.Purge(ctx, inbox.PurgeParams{OlderThan: 30 * 24 * time.Hour})
	is.NoErr(err)
	is.Equal(res.Purged, int64(0))
	is.Equal(res.Batches, 0)

	_, err = ops.Purge(ctx, inbox.PurgeParams{})
	is.True(errors.Is(err, inbox.ErrInvalid)) // a retention period is required
}

func TestAdminPurgeRunsInBatches(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	ops := admNew(t, pool).Operator()

	const eligible, batch = 100_000, 7_000
	t0 := time.Now()
	_, err := pool.Exec(ctx, `
		INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
			event_type, schema_version, fingerprint, payload, status, attempts, completed_at, created_at)
		SELECT lpad(to_hex(i), 32, '0')::uuid, 'tenant', 'bulk', 'orders-service', 'orders.projection.v1',
			'bulk-' || lpad(i::text, 6, '0'), -- ascending keys: cheap index inserts
			'order.created', 1, sha256(('bulk-' || i)::bytea), jsonb_build_object('orderId', 'o-' || i),
			'COMPLETED', 1, now() - interval '40 days' + i * interval '1 second', now() - interval '40 days' + i * interval '1 second'
		FROM generate_series(1, $1::int) AS i`, eligible)
	is.NoErr(err)
	_, err = pool.Exec(ctx, `
		INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
			event_type, schema_version, fingerprint, payload, status, completed_at, created_at)
		SELECT gen_random_uuid(), 'global', '', 'orders-service', 'orders.projection.v1', 'recent-' || i,
			'order.created', 1, sha256(('recent-' || i)::bytea), '{}', 'COMPLETED', now() - interval '1 day', now() - interval '1 day'
		FROM generate_series(1, 10) AS i`)
	is.NoErr(err)
	_, err = pool.Exec(ctx, "ANALYZE pginbox_receipts")
	is.NoErr(err)
	t.Logf("inserted %d rows in %s", eligible+10, time.Since(t0).Round(time.Millisecond))

	var progress []inbox.PurgeResult
	res, err := ops.Purge(ctx, inbox.PurgeParams{
		OlderThan: 30 * 24 * time.Hour,
		BatchSize: batch,
		Progress:  func(r inbox.PurgeResult) { progress = append(progress, r) },
	})
	is.NoErr(err)
	t.Logf("purged %d payloads in %d batches in %s", res.Purged, res.Batches, res.Elapsed.Round(time.Millisecond))

	wantBatches := (eligible + batch - 1) / batch // ceil: 15
	is.Equal(res.Purged, int64(eligible))
	is.Equal(res.Batches, wantBatches)
	is.Equal(len(progress), wantBatches)
	for i, p := range progress[:len(progress)-1] {
		is.Equal(p.Purged, int64((i+1)*batch)) // every batch but the last is full
	}
	last := progress[len(progress)-1]
	is.Equal(last.Purged, res.Purged)
	is.Equal(last.Batches, res.Batches)
	is.Equal(countRows(t, pool, "payload IS NULL AND payload_purged_at IS NOT NULL"), eligible)
	is.Equal(countRows(t, pool, "payload IS NOT NULL"), 10)
}

func TestAdminTenantViewIsolation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	admin := admNew(t, pool)
	viewA, viewB := admin.ForTenant("tenant-a"), admin.ForTenant("tenant-b")

	aDead := admAccept(t, c, admTenantMsg("tenant-a", "evt-1", raw(`{"n":1}`)))
	aDone := admAccept(t, c, admTenantMsg("tenant-a", "evt-2", raw(`{"n":2}`)))
	bDead := admAccept(t, c, admTenantMsg("tenant-b", "evt-1", raw(`{"n":1}`))) // same message ID, other tenant
	gMsg := orderMsg("evt-g", raw(`{}`))
	gMsg.Scope = inbox.Global()
	global := admAccept(t, c, gMsg)
	admSet(t, pool, aDead, "status = 'DEAD'")
	admSet(t, pool, bDead, "status = 'DEAD'")
	admSet(t, pool, aDone, "status = 'COMPLETED', completed_at = now() - interval '40 days'")
	snapA := []string{rowSnapshot(t, pool, aDead), rowSnapshot(t, pool, aDone)}

	// tenant-b cannot see or touch tenant-a's receipts: they are not found.
	for _, id := range []inbox.ID{aDead, aDone, global} {
		_, err := viewB.Get(ctx, id)
		is.True(errors.Is(err, inbox.ErrNotFound))
	}
	_, err := viewB.Requeue(ctx, aDead, admChange(1))
	is.True(errors.Is(err, inbox.ErrNotFound))
	_, err = viewB.Replay(ctx, aDone, admChange(1))
	is.True(errors.Is(err, inbox.ErrNotFound))
	res, err := viewB.Purge(ctx, inbox.PurgeParams{OlderThan: time.Hour})
	is.NoErr(err)
	is.Equal(res.Purged, int64(0))
	is.Equal([]string{rowSnapshot(t, pool, aDead), rowSnapshot(t, pool, aDone)}, snapA)
	is.Equal(admAudit(t, pool), 0)
	is.Equal(countRows(t, pool, "replay_of IS NOT NULL"), 0)

	page, err := viewB.List(ctx, inbox.ListParams{})
	is.NoErr(err)
	is.Equal(len(page.Receipts), 1)
	is.Equal(page.Receipts[0].ID, bDead)
	page, err = viewB.List(ctx, inbox.ListParams{Statuses: []inbox.Status{inbox.StatusCompleted}})
	is.NoErr(err)
	is.Equal(len(page.Receipts), 0)

	st, err := viewB.Stats(ctx, inbox.StatsParams{IncludeCompleted: true})
	is.NoErr(err)
	is.Equal(st.Dead, int64(1))
	is.Equal(len(st.Consumers), 1)
	is.Equal(st.Consumers[0].Completed, int64(0))

	// Its own receipt works as usual.
	got, err := viewB.Get(ctx, bDead)
	is.NoErr(err)
	is.Equal(got.Scope, inbox.Tenant("tenant-b"))
	_, err = viewB.Requeue(ctx, bDead, admChange(got.Version))
	is.NoErr(err)

	// tenant-a's view, the global view and the operator view see what they should.
	page, err = viewA.List(ctx, inbox.ListParams{})
	is.NoErr(err)
	is.Equal(len(page.Receipts), 2)
	_, err = admin.Global().Get(ctx, aDead)
	is.True(errors.Is(err, inbox.ErrNotFound))
	_, err = admin.Global().Get(ctx, global)
	is.NoErr(err)
	page, err = admin.Operator().List(ctx, inbox.ListParams{})
	is.NoErr(err)
	is.Equal(len(page.Receipts), 4)

	// tenant-b's audit trail shows only its own action.
	got, err = viewB.Get(ctx, bDead)
	is.NoErr(err)
	is.Equal(len(got.Audit), 1)
	is.Equal(got.Audit[0].ReceiptID, bDead)

	// An empty tenant ID is refused, not widened.
	_, err = admin.ForTenant("").List(ctx, inbox.ListParams{})
	is.True(errors.Is(err, inbox.ErrInvalid))
	_, err = admin.ForScope(inbox.Scope{}).Get(ctx, aDead)
	is.True(errors.Is(err, inbox.ErrInvalid))
}

// admStatsRow is one hand-built receipt of the stats fixture.
type admStatsRow struct {
	scope    string // tenant ID
	consumer string
	status   string
	due      string // available_at relative to now(), as an interval
}

func TestAdminStatsMatchFixture(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	admin := admNew(t, pool)

	fixture := []admStatsRow{
		{"t1", "billing.v1", "PENDING", "-10 seconds"},
		{"t1", "billing.v1", "PENDING", "-90 seconds"}, // billing's oldest due
		{"t1", "billing.v1", "PENDING", "-5 seconds"},
		{"t1", "billing.v1", "PENDING", "1 hour"}, // not due yet
		{"t1", "billing.v1", "RETRYABLE", "-30 seconds"},
		{"t1", "billing.v1", "RETRYABLE", "10 minutes"},
		{"t1", "billing.v1", "PROCESSING", "-1 hour"}, // claimed: never due
		{"t1", "billing.v1", "DEAD", "-2 hours"},      // dead: never due
		{"t1", "billing.v1", "DEAD", "0"},
		{"t2", "billing.v1", "DEAD", "0"},
		{"t1", "billing.v1", "COMPLETED", "0"},
		{"t1", "billing.v1", "COMPLETED", "0"},
		{"t1", "billing.v1", "COMPLETED", "0"},
		{"t1", "billing.v1", "COMPLETED", "0"},
		{"t1", "orders.v1", "DEAD", "0"},
		{"t1", "orders.v1", "RETRYABLE", "-200 seconds"},
		{"t2", "orders.v1", "COMPLETED", "0"},
		{"t2", "orders.v1", "COMPLETED", "0"},
		{"t1", "mail.v1", "COMPLETED", "0"}, // only COMPLETED: listed only when counted
	}
	for i, r := range fixture {
		var id inbox.ID
		err := pool.QueryRow(ctx, `
			INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
				event_type, schema_version, fingerprint, payload)
			VALUES (gen_random_uuid(), 'tenant', $1, 'fixture', $2, $3, 'x', 1, sha256(convert_to($3, 'UTF8')), '{}')
			RETURNING id`, r.scope, r.consumer, fmt.Sprintf("m-%d", i)).Scan(&id)
		is.NoErr(err)
		admSet(t, pool, id, "status = '"+r.status+"', available_at = now() + $2::interval", r.due)
	}

	st, err := admin.Operator().Stats(ctx, inbox.StatsParams{})
	is.NoErr(err)
	is.Equal(st.Dead, int64(4))
	is.True(!st.CompletedCounted)
	is.Equal(len(st.Consumers), 2) // mail.v1 has only COMPLETED receipts
	billing, orders := st.Consumers[0], st.Consumers[1]
	is.Equal(billing.Consumer, "billing.v1")
	is.Equal(orders.Consumer, "orders.v1")

	// Ages are compared within a tolerance for the time the test takes.
	age := func(got time.Duration, want time.Duration) {
		t.Helper()
		if got < want || got > want+5*time.Second {
			t.Errorf("oldest due age %s, want %s (+5s)", got, want)
		}
	}
	age(billing.OldestDueAge, 90*time.Second)
	billing.OldestDueAge = 0
	is.Equal(billing, inbox.ConsumerStats{Consumer: "billing.v1", Pending: 4, Processing: 1, Retryable: 2, Dead: 3, Due: 4})
	age(orders.OldestDueAge, 200*time.Second)
	orders.OldestDueAge = 0
	is.Equal(orders, inbox.ConsumerStats{Consumer: "orders.v1", Retryable: 1, Dead: 1, Due: 1})

	st, err = admin.Operator().Stats(ctx, inbox.StatsParams{IncludeCompleted: true})
	is.NoErr(err)
	is.True(st.CompletedCounted)
	is.Equal(len(st.Consumers), 3)
	is.Equal(st.Consumers[0].Completed, int64(4))
	is.Equal(st.Consumers[1].Consumer, "mail.v1")
	is.Equal(st.Consumers[1].Completed, int64(1))
	is.Equal(st.Consumers[2].Completed, int64(2))

	// A tenant view counts its own receipts only.
	st, err = admin.ForTenant("t2").Stats(ctx, inbox.StatsParams{IncludeCompleted: true})
	is.NoErr(err)
	is.Equal(st.Dead, int64(1))
	is.Equal(st.Consumers, []inbox.ConsumerStats{
		{Consumer: "billing.v1", Dead: 1},
		{Consumer: "orders.v1", Completed: 2},
	})

	// An empty inbox has no consumers.
	st, err = admin.Global().Stats(ctx, inbox.StatsParams{})
	is.NoErr(err)
	is.Equal(len(st.Consumers), 0)
	is.Equal(st.Dead, int64(0))
}

func TestAdminListPagesAndFilters(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ops := admNew(t, pool).Operator()

	var ids []inbox.ID
	for i := range 25 {
		m := orderMsg(fmt.Sprintf("evt-%02d", i), raw(`{}`))
		if i%5 == 0 {
			m.Consumer = "billing.v1"
		}
		if i%2 == 0 {
			m.Source = "billing-service"
		}
		ids = append(ids, admAccept(t, c, m))
	}
	admSet(t, pool, ids[3], "status = 'DEAD'")
	admSet(t, pool, ids[7], "status = 'DEAD'")
	admSet(t, pool, ids[8], "status = 'RETRYABLE'")

	// Keyset pages in ID order cover everything exactly once.
	var seen []inbox.ID
	after := inbox.ID{}
	pages := 0
	for {
		page, err := ops.List(ctx, inbox.ListParams{Limit: 10, After: after})
		is.NoErr(err)
		pages++
		for _, r := range page.Receipts {
			seen = append(seen, r.ID)
			is.Equal(r.Payload, nil) // lists do not carry payloads
		}
		if page.Next.IsZero() {
			break
		}
		is.Equal(page.Next, page.Receipts[len(page.Receipts)-1].ID)
		after = page.Next
	}
	is.Equal(pages, 3)
	is.Equal(seen, ids)

	page, err := ops.List(ctx, inbox.ListParams{Statuses: []inbox.Status{inbox.StatusDead, inbox.StatusRetryable}})
	is.NoErr(err)
	is.Equal(len(page.Receipts), 3)
	is.Equal(page.Receipts[0].ID, ids[3])
	is.True(page.Next.IsZero())

	page, err = ops.List(ctx, inbox.ListParams{Consumer: "billing.v1"})
	is.NoErr(err)
	is.Equal(len(page.Receipts), 5)

	page, err = ops.List(ctx, inbox.ListParams{Consumer: "billing.v1", Source: "billing-service"})
	is.NoErr(err)
	is.Equal(len(page.Receipts), 3) // 0, 10, 20

	// Created range: move five receipts into the past.
	admSet(t, pool, ids[0], "created_at = now() - interval '2 days'")
	admSet(t, pool, ids[1], "created_at = now() - interval '2 days'")
	page, err = ops.List(ctx, inbox.ListParams{CreatedBefore: time.Now().Add(-24 * time.Hour)})
	is.NoErr(err)
	is.Equal(len(page.Receipts), 2)
	page, err = ops.List(ctx, inbox.ListParams{CreatedAfter: time.Now().Add(-24 * time.Hour)})
	is.NoErr(err)
	is.Equal(len(page.Receipts), 23)

	_, err = ops.List(ctx, inbox.ListParams{Statuses: []inbox.Status{"BROKEN"}})
	is.True(errors.Is(err, inbox.ErrInvalid))
	_, err = ops.List(ctx, inbox.ListParams{Limit: inbox.MaxListLimit + 1})
	is.True(errors.Is(err, inbox.ErrInvalid))
}

func TestAdminGetDetails(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ops := admNew(t, pool).Operator()

	msg := orderMsg("evt-1", map[string]any{"orderId": "o-1"})
	msg.Metadata = map[string]string{"correlation-id": "c-1"}
	id := admAccept(t, c, msg)
	got, err := ops.Get(ctx, id)
	is.NoErr(err)
	is.Equal(got.ID, id)
	is.Equal(got.Scope, inbox.Tenant("tenant-a"))
	is.Equal(got.Source, "orders-service")
	is.Equal(got.EventType, "order.created")
	is.Equal(got.SchemaVersion, 1)
	is.Equal(got.Status, inbox.StatusPending)
	is.Equal(got.Version, int64(1))
	is.Equal(got.MaxAttempts, inbox.DefaultMaxAttempts)
	is.Equal(len(got.Fingerprint), 32)
	is.Equal(got.Metadata, map[string]string{"correlation-id": "c-1"})
	var p map[string]string
	is.NoErr(json.Unmarshal(got.Payload, &p))
	is.Equal(p["orderId"], "o-1")
	is.True(!got.IsReplay())
	is.Equal(len(got.Replays), 0)
	is.Equal(len(got.Audit), 0)
	is.Equal(got.CompletedAt, nil)

	_, err = ops.Get(ctx, inbox.ID{9})
	is.True(errors.Is(err, inbox.ErrNotFound))
}

// On a small table the planner may re-run a batch's candidate query per row; the
// batch limit must hold anyway.
func TestAdminPurgeSmallBatchesKeepTheLimit(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, _ := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	ops := admNew(t, pool).Operator()
	for i := range 10 {
		id := admAccept(t, c, orderMsg(fmt.Sprintf("evt-%d", i), raw(`{}`)))
		admSet(t, pool, id, "status = 'COMPLETED', completed_at = now() - interval '2 days'")
	}
	var purged []int64
	res, err := ops.Purge(ctx, inbox.PurgeParams{
		OlderThan: 24 * time.Hour,
		BatchSize: 3,
		Progress:  func(r inbox.PurgeResult) { purged = append(purged, r.Purged) },
	})
	is.NoErr(err)
	is.Equal(res.Batches, 4)
	is.Equal(purged, []int64{3, 6, 9, 10})
}
