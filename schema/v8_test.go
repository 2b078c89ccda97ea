package schema_test

import (
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// v8 rebuilds the due index with the scope after the consumer (claims serve
// scopes in turns) and its down step restores the v7 index.
func TestV8DueIndexLeadsWithTheScope(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	dueIndex := func() string {
		var def string
		is.NoErr(pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE indexname = 'pginbox_work_due'`).Scan(&def))
		return def
	}
	_, err := m.UpTo(ctx, 7)
	is.NoErr(err)
	is.True(strings.Contains(dueIndex(), "(consumer, available_at)"))

	applied, err := m.UpTo(ctx, 8)
	is.NoErr(err)
	is.Equal(applied, []int64{8})
	is.True(strings.Contains(dueIndex(), "(consumer, scope_kind, scope_id, available_at)"))
	is.True(strings.Contains(dueIndex(), "WHERE (status = ANY"))

	rolled, err := m.DownTo(ctx, 7)
	is.NoErr(err)
	is.Equal(rolled, []int64{8})
	is.True(strings.Contains(dueIndex(), "(consumer, available_at)"))
}
