package schema_test

import (
	"context"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
)

// v10 adds pginbox_accept: a new identity gets its receipt and queue row and
// the queue row back, an existing one nothing; down drops the function and
// leaves the rows.
func TestV10AcceptFunctionUpAndDown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.UpTo(ctx, 9)
	is.NoErr(err)
	applied, err := m.UpTo(ctx, 10)
	is.NoErr(err)
	is.Equal(applied, []int64{10})

	fp := inbox.Fingerprint("e", 1, []byte(`{"n":1}`))
	accept := func(id inboxtype.ID) (rows int, status string) {
		t.Helper()
		r, err := pool.Query(ctx, `SELECT w.receipt_id, w.status FROM pginbox_accept($1, 'tenant', 'a', 's', 'c', 'm-1', 'e', 1, $2, '{"n":1}', '{}', 10) w`, id, fp[:])
		is.NoErr(err)
		defer r.Close()
		for r.Next() {
			var got inboxtype.ID
			is.NoErr(r.Scan(&got, &status))
			is.Equal(got, id)
			rows++
		}
		is.NoErr(r.Err())
		return rows, status
	}
	first := inboxtype.New()
	rows, status := accept(first)
	is.Equal(rows, 1)
	is.Equal(status, "PENDING")
	rows, _ = accept(inboxtype.New()) // the same identity again
	is.Equal(rows, 0)
	var receipts, work int
	is.NoErr(pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pginbox_receipts), (SELECT count(*) FROM pginbox_work WHERE receipt_id = $1)`, first).Scan(&receipts, &work))
	is.Equal(receipts, 1)
	is.Equal(work, 1)

	rolled, err := m.DownTo(ctx, 9)
	is.NoErr(err)
	is.Equal(rolled, []int64{10})
	var fn *string
	is.NoErr(pool.QueryRow(ctx, `SELECT to_regproc('pginbox_accept')::text`).Scan(&fn))
	is.True(fn == nil)
	is.NoErr(pool.QueryRow(ctx, `SELECT count(*) FROM pginbox_receipts`).Scan(&receipts))
	is.Equal(receipts, 1)
}
