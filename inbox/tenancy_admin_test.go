package inbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// The admin API under row-level security: a tenant's view on the
// application role reads, requeues, replays and purges its own receipts and
// finds nothing of another tenant's; a view of every scope fails with
// ErrTenancyRestricted on that role and works on a BYPASSRLS SystemPool.
func TestAdminUnderAppRole(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	td := newTenancyDB(t)
	a, b := inbox.Tenant("a"), inbox.Tenant("b")
	ids := acceptAll(t, newClient(t, td.app, inbox.Config{}),
		tenantMsg(a, "done"), tenantMsg(a, "dead"), tenantMsg(b, "done"), tenantMsg(b, "dead"))
	aDone, aDead, bDone, bDead := ids[0], ids[1], ids[2], ids[3]
	for _, id := range []inbox.ID{aDead, bDead} {
		inboxtest.SetState(t, td.owner, id, "status = 'DEAD', attempts = max_attempts, last_error = 'boom'")
	}
	w := newWorker(t, td.app, registry(t, func(context.Context, *handler.Msg) error { return nil }), inbox.WorkerConfig{SystemPool: td.sys})
	is.Equal(inboxtest.Drain(t, w), 2)

	admin, err := inbox.NewAdmin(td.app, inbox.AdminConfig{Logger: testLogger(t)})
	is.NoErr(err)
	va := admin.ForTenant("a")

	page, err := va.List(ctx, inbox.ListParams{})
	is.NoErr(err)
	is.Equal(len(page.Receipts), 2)
	for _, r := range page.Receipts {
		is.Equal(r.Scope, a)
	}
	_, err = va.Get(ctx, bDone)
	is.True(errors.Is(err, inbox.ErrNotFound))
	got, err := va.Get(ctx, aDead)
	is.NoErr(err)
	stats, err := va.Stats(ctx, inbox.StatsParams{IncludeCompleted: true})
	is.NoErr(err)
	is.Equal(stats.Dead, int64(1))
	groups, err := va.DeadGroups(ctx, inbox.DeadGroupsParams{})
	is.NoErr(err)
	is.Equal(len(groups.Groups), 1)

	change := inbox.ChangeParams{ExpectedVersion: got.Version, Actor: "ops", Reason: "fixed"}
	_, err = va.Requeue(ctx, bDead, change)
	is.True(errors.Is(err, inbox.ErrNotFound)) // another tenant's receipt
	rq, err := va.Requeue(ctx, aDead, change)
	is.NoErr(err)
	is.True(rq.AuditID > 0)

	done, err := va.Get(ctx, aDone)
	is.NoErr(err)
	rp, err := va.Replay(ctx, aDone, inbox.ChangeParams{ExpectedVersion: done.Version, Actor: "ops", Reason: "again"})
	is.NoErr(err)
	replayed, err := va.Get(ctx, rp.NewID)
	is.NoErr(err)
	is.Equal(replayed.Scope, a)
	is.Equal(len(replayed.Audit)+len(done.Audit), 1) // the replay's audit row is visible in a's scope

	// The caller's transaction of another scope is refused, not switched.
	err = pgx.BeginFunc(ctx, td.app, func(tx pgx.Tx) error {
		if err := inbox.ApplyScope(ctx, tx, b); err != nil {
			return err
		}
		_, err := va.RequeueTx(ctx, tx, aDead, change)
		is.True(errors.Is(err, inbox.ErrScopeMismatch))
		return nil
	})
	is.NoErr(err)

	// Purge of a's scope drops a's completed payloads only.
	purged, err := va.Purge(ctx, inbox.PurgeParams{Before: time.Now()})
	is.NoErr(err)
	is.Equal(purged.Purged, int64(1))
	is.Equal(td.allCount(t, "pginbox_receipts", "id = $1 AND payload IS NULL", aDone), 1)
	is.Equal(td.allCount(t, "pginbox_receipts", "id = $1 AND payload IS NOT NULL", bDone), 1)

	// Every scope on the application role: refused, not silently empty.
	ops := admin.Operator()
	_, err = ops.List(ctx, inbox.ListParams{})
	is.True(errors.Is(err, inbox.ErrTenancyRestricted))
	_, err = ops.Stats(ctx, inbox.StatsParams{})
	is.True(errors.Is(err, inbox.ErrTenancyRestricted))
	_, err = ops.Get(ctx, bDone)
	is.True(errors.Is(err, inbox.ErrTenancyRestricted))
	_, err = ops.Purge(ctx, inbox.PurgeParams{Before: time.Now()})
	is.True(errors.Is(err, inbox.ErrTenancyRestricted))
	_, err = ops.Requeue(ctx, bDead, change)
	is.True(errors.Is(err, inbox.ErrTenancyRestricted))

	// With a SystemPool on the BYPASSRLS role, every scope works.
	sysAdmin, err := inbox.NewAdmin(td.app, inbox.AdminConfig{Logger: testLogger(t), SystemPool: td.sys})
	is.NoErr(err)
	all, err := sysAdmin.Operator().List(ctx, inbox.ListParams{})
	is.NoErr(err)
	is.Equal(len(all.Receipts), 5) // four and the replay
	bd, err := sysAdmin.Operator().Get(ctx, bDead)
	is.NoErr(err)
	_, err = sysAdmin.Operator().Requeue(ctx, bDead, inbox.ChangeParams{ExpectedVersion: bd.Version, Actor: "ops", Reason: "fixed"})
	is.NoErr(err)
	purged, err = sysAdmin.Operator().Purge(ctx, inbox.PurgeParams{Before: time.Now()})
	is.NoErr(err)
	is.Equal(purged.Purged, int64(1)) // b's
	gv, err := sysAdmin.Global().List(ctx, inbox.ListParams{})
	is.NoErr(err)
	is.Equal(len(gv.Receipts), 0)
}

// Without row-level security enabled, the views of every scope work on any
// role with the grants, as before.
func TestAdminOperatorWithoutTenancy(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, _ := newPool(t)
	acceptAll(t, newClient(t, pool, inbox.Config{}), tenantMsg(inbox.Tenant("a"), "one"), tenantMsg(inbox.Global(), "two"))
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: testLogger(t)})
	is.NoErr(err)
	page, err := admin.Operator().List(context.Background(), inbox.ListParams{})
	is.NoErr(err)
	is.Equal(len(page.Receipts), 2)
}
