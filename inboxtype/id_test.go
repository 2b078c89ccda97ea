package inboxtype_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
)

func TestMain(m *testing.M) { inboxtest.Main(m) }

func TestIDTextForms(t *testing.T) {
	is := is.New(t)
	id := inboxtype.New()
	is.True(!id.IsZero())
	is.True(inboxtype.New() != id)

	p, err := inboxtype.Parse(id.String())
	is.NoErr(err)
	is.Equal(p, id)
	p, err = inboxtype.Parse(id.UUIDString())
	is.NoErr(err)
	is.Equal(p, id)

	b, err := json.Marshal(id)
	is.NoErr(err)
	var back inboxtype.ID
	is.NoErr(json.Unmarshal(b, &back))
	is.Equal(back, id)

	for _, bad := range []string{"", "nope", "01ARZ3NDEKTSV4RRFFQ69G5FA!", "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz"} {
		_, err := inboxtype.Parse(bad)
		is.True(err != nil)
	}
}

// Every pgx exec mode must encode and scan ID, including the simple protocol
// PgBouncer's transaction mode needs, and NULL must map to the zero ID.
func TestIDRoundTripsInEveryExecMode(t *testing.T) {
	ctx := context.Background()
	dsn := inboxtest.EmptyDatabase(t)
	modes := map[string]pgx.QueryExecMode{
		"cache statement": pgx.QueryExecModeCacheStatement,
		"cache describe":  pgx.QueryExecModeCacheDescribe,
		"describe exec":   pgx.QueryExecModeDescribeExec,
		"exec":            pgx.QueryExecModeExec,
		"simple protocol": pgx.QueryExecModeSimpleProtocol,
	}
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			cfg, err := pgx.ParseConfig(dsn)
			is.NoErr(err)
			cfg.DefaultQueryExecMode = mode
			conn, err := pgx.ConnectConfig(ctx, cfg)
			is.NoErr(err)
			defer conn.Close(ctx)

			id := inboxtype.New()
			var text string
			var back inboxtype.ID
			is.NoErr(conn.QueryRow(ctx, "SELECT $1::uuid::text, $1::uuid", id).Scan(&text, &back))
			is.Equal(text, id.UUIDString())
			is.Equal(back, id)

			var null inboxtype.ID = inboxtype.New()
			is.NoErr(conn.QueryRow(ctx, "SELECT NULL::uuid").Scan(&null))
			is.True(null.IsZero())
			var isNull bool
			is.NoErr(conn.QueryRow(ctx, "SELECT $1::uuid IS NULL", inboxtype.ID{}).Scan(&isNull))
			is.True(isNull)
		})
	}
}

func TestIDWithDatabaseSQL(t *testing.T) {
	is := is.New(t)
	db, err := sql.Open("pgx", inboxtest.EmptyDatabase(t))
	is.NoErr(err)
	defer db.Close()
	id := inboxtype.New()
	var back inboxtype.ID
	is.NoErr(db.QueryRow("SELECT $1::uuid", id).Scan(&back))
	is.Equal(back, id)
}
