package schema_test

import (
	"context"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// v13 adds the functions of sessions on Citus worker nodes (one server has
// them too, unused: one schema for both lines); down drops them.
func TestV13NodeSessionFunctionsUpAndDown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.UpTo(ctx, 12)
	is.NoErr(err)
	functions := func() string {
		t.Helper()
		return queryText(t, pool, `SELECT coalesce(string_agg(proname, ',' ORDER BY proname), '') FROM pg_proc
			WHERE proname IN ('pginbox_accept_batch', 'pginbox_local_due_scopes', 'pginbox_local_expired_scopes')`)
	}
	is.Equal(functions(), "")
	applied, err := m.UpTo(ctx, 13)
	is.NoErr(err)
	is.Equal(applied, []int64{13})
	is.Equal(functions(), "pginbox_accept_batch,pginbox_local_due_scopes,pginbox_local_expired_scopes")
	rolled, err := m.DownTo(ctx, 12)
	is.NoErr(err)
	is.Equal(rolled, []int64{13})
	is.Equal(functions(), "")
}

// On Citus, v13 distributes the batch accept by its scope argument,
// colocated with pginbox's tables, and the discovery functions without
// one, so they exist on every node.
func TestV13CitusDistributesTheFunctions(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	_, pool := open(t, inboxtest.CitusDatabase(t))
	got := queryText(t, pool, `SELECT string_agg(p.proname || ':' || coalesce(p.proargnames[d.distribution_argument_index + 1], '-') || ':' ||
			(d.colocationid IS NOT DISTINCT FROM (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'pginbox_receipts'::regclass))::text,
			',' ORDER BY p.proname)
		FROM pg_proc p JOIN pg_dist_object d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
		WHERE p.proname IN ('pginbox_accept_batch', 'pginbox_local_due_scopes', 'pginbox_local_expired_scopes')`)
	is.Equal(got, "pginbox_accept_batch:p_scope_id:true,pginbox_local_due_scopes:-:false,pginbox_local_expired_scopes:-:false")
}
