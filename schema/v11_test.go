package schema_test

import (
	"context"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// v11 sets pginbox_accept to custom plans (why: the migration's comment and
// inbox's TestCitusAcceptMemoryStaysFlat); down takes the setting away.
func TestV11AcceptFunctionPlansUpAndDown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.UpTo(ctx, 10)
	is.NoErr(err)
	config := func() string {
		t.Helper()
		return queryText(t, pool, `SELECT coalesce(array_to_string(proconfig, ','), '') FROM pg_proc WHERE proname = 'pginbox_accept'`)
	}
	v10 := config() // the search_path v10 fixed

	applied, err := m.UpTo(ctx, 11)
	is.NoErr(err)
	is.Equal(applied, []int64{11})
	is.Equal(config(), v10+",plan_cache_mode=force_custom_plan")

	rolled, err := m.DownTo(ctx, 10)
	is.NoErr(err)
	is.Equal(rolled, []int64{11})
	is.Equal(config(), v10)
}
