package schema_test

import (
	"context"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// v12 leaves half of each pginbox_receipts page free (why: the migration's
// comment and inbox's TestConcurrentSettlingStaysOnTheReceiptsPage); down
// puts back v4's 85.
func TestV12ReceiptsFillfactorUpAndDown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.UpTo(ctx, 11)
	is.NoErr(err)
	options := func() string {
		t.Helper()
		return queryText(t, pool, `SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = 'pginbox_receipts'::regclass`)
	}
	is.Equal(options(), "fillfactor=85")

	applied, err := m.UpTo(ctx, 12)
	is.NoErr(err)
	is.Equal(applied, []int64{12})
	is.Equal(options(), "fillfactor=50")

	rolled, err := m.DownTo(ctx, 11)
	is.NoErr(err)
	is.Equal(rolled, []int64{12})
	is.Equal(options(), "fillfactor=85")
}
