package schema_test

import (
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/schema"
)

// DownTo checks every step's precondition before it rolls anything back: a
// tenant receipt that v1 cannot hold refuses DownTo(1) at the current
// version, not after v3 and above were rolled back.
func TestDownToRefusesBeforeSteppingDown(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.Up(ctx)
	is.NoErr(err)
	_, err = pool.Exec(ctx, `INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, fingerprint, payload)
		VALUES ($1, 'tenant', 't1', 's', 'c', 'm', 'e', 1, $2, '{}')`, inboxtype.New(), make([]byte, 32))
	is.NoErr(err)

	rolled, downErr := m.DownTo(ctx, 1)
	cur, err := m.Current(ctx)
	is.NoErr(err)
	is.Equal(cur, schema.Version) // nothing moved
	is.Equal(len(rolled), 0)
	is.True(downErr != nil)
	is.True(strings.Contains(downErr.Error(), "cannot migrate down to schema v1: tenant-scoped, replayed or purged receipts exist"))
	is.True(strings.Contains(downErr.Error(), "nothing was rolled back"))
}

// A step that fails for a reason no guard knows (an application view on the
// table the step drops) stops DownTo, which returns the versions it did roll
// back with the error.
func TestDownToReportsTheStepsItRanWhenOneFails(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.Up(ctx)
	is.NoErr(err)
	// v5's down step drops pginbox_outbox.
	_, err = pool.Exec(ctx, "CREATE VIEW app_outbox_ids AS SELECT id FROM pginbox_outbox")
	is.NoErr(err)

	rolled, err := m.DownTo(ctx, 4)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "other objects depend on it"))
	var want []int64
	for v := schema.Version; v > 5; v-- {
		want = append(want, v)
	}
	is.Equal(rolled, want) // every step above v5 ran; v5's failed
	cur, err := m.Current(ctx)
	is.NoErr(err)
	is.Equal(cur, int64(5))
}
