package schema_test

import (
	"context"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
)

// v9 adds ordering keys to receipts and work rows that v8 wrote (none of
// them keyed), lets the work status be BLOCKED and the audit trail record
// skips; its down step makes waiting receipts due, refuses to drop skips
// from the audit trail, and keeps the view's grants.
func TestV9OrderingUpgradeAndDown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.UpTo(ctx, 8)
	is.NoErr(err)
	_, err = pool.Exec(ctx, `CREATE ROLE v9_reader NOLOGIN`)
	if err != nil {
		_, err = pool.Exec(ctx, `SELECT 1`) // the role exists from another run of the cluster
	}
	is.NoErr(err)
	_, err = pool.Exec(ctx, `GRANT SELECT ON pginbox_receipts_live TO v9_reader`)
	is.NoErr(err)

	// Rows v8 wrote: one pending, one completed.
	fp := inbox.Fingerprint("e", 1, []byte(`{"n":1}`))
	pending, done := inboxtype.New(), inboxtype.New()
	for _, r := range []struct {
		id     inboxtype.ID
		status string
	}{{pending, "PENDING"}, {done, "COMPLETED"}} {
		_, err := pool.Exec(ctx, `INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
				event_type, schema_version, fingerprint, payload, status, completed_at)
			VALUES ($1, 'tenant', 'a', 's', 'c', $4, 'e', 1, $2, '{"n":1}', $3::text, CASE WHEN $3::text = 'COMPLETED' THEN now() END)`,
			r.id, fp[:], r.status, r.id.String())
		is.NoErr(err)
	}
	_, err = pool.Exec(ctx, `INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts) VALUES ($1, 'tenant', 'a', 'c', 10)`, pending)
	is.NoErr(err)

	applied, err := m.UpTo(ctx, 9)
	is.NoErr(err)
	is.Equal(applied, []int64{9})
	var status string
	var blocked bool
	var key *string
	is.NoErr(pool.QueryRow(ctx, `SELECT status, blocked, ordering_key FROM pginbox_receipts_live WHERE id = $1`, pending).Scan(&status, &blocked, &key))
	is.Equal(status, "PENDING")
	is.True(!blocked)
	is.True(key == nil)

	// A keyed receipt waiting behind another shows as PENDING and blocked.
	waiting := inboxtype.New()
	_, err = pool.Exec(ctx, `INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id,
			event_type, schema_version, fingerprint, payload, ordering_key, ordering_seq)
		VALUES ($1, 'tenant', 'a', 's', 'c', 'w', 'e', 1, $2, '{"n":1}', 'k', 2)`, waiting, fp[:])
	is.NoErr(err)
	_, err = pool.Exec(ctx, `INSERT INTO pginbox_work (receipt_id, scope_kind, scope_id, consumer, max_attempts, status, ordering_key, ordering_seq)
		VALUES ($1, 'tenant', 'a', 'c', 10, 'BLOCKED', 'k', 2)`, waiting)
	is.NoErr(err)
	is.NoErr(pool.QueryRow(ctx, `SELECT status, blocked FROM pginbox_receipts_live WHERE id = $1`, waiting).Scan(&status, &blocked))
	is.Equal(status, "PENDING")
	is.True(blocked)
	_, err = pool.Exec(ctx, `INSERT INTO pginbox_audit (receipt_id, scope_kind, scope_id, action, actor, reason, from_status, to_status, from_version, to_version)
		VALUES ($1, 'tenant', 'a', 'skip', 'ops', 'r', 'DEAD', 'DEAD', 1, 2)`, done)
	is.NoErr(err)

	// Down refuses while the audit trail records a skip, and changes nothing.
	_, err = m.DownTo(ctx, 8)
	is.True(err != nil)
	var version int64
	is.NoErr(pool.QueryRow(ctx, `SELECT max(version_id) FROM pginbox_schema_version WHERE is_applied`).Scan(&version))
	is.Equal(version, int64(9))

	_, err = pool.Exec(ctx, `DELETE FROM pginbox_audit WHERE action = 'skip'`)
	is.NoErr(err)
	rolled, err := m.DownTo(ctx, 8)
	is.NoErr(err)
	is.Equal(rolled, []int64{9})
	is.NoErr(pool.QueryRow(ctx, `SELECT status FROM pginbox_work WHERE receipt_id = $1`, waiting).Scan(&status))
	is.Equal(status, "PENDING") // due now, without order
	var cols int
	is.NoErr(pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_name IN ('pginbox_receipts', 'pginbox_work', 'pginbox_receipts_live') AND column_name IN ('ordering_key', 'ordering_seq', 'blocked')`).Scan(&cols))
	is.Equal(cols, 0)
	var granted bool
	is.NoErr(pool.QueryRow(ctx, `SELECT has_table_privilege('v9_reader', 'pginbox_receipts_live', 'SELECT')`).Scan(&granted))
	is.True(granted)

	// And up again.
	applied, err = m.UpTo(ctx, 9)
	is.NoErr(err)
	is.Equal(applied, []int64{9})
}
