package schema_test

import (
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/schema"
)

// A v2 database can hold a payload accepted before the accept-time number
// limits: 8,201 copies of 1e131071 are small as jsonb (numeric keeps the
// exponent) but print as more than 1 GB of digits, more than a text value can
// hold, so v3's conversion to json text cannot store it. The upgrade must not
// wedge on it: that receipt is quarantined (DEAD if it was still to be
// handled, COMPLETED otherwise, its payload dropped with the reason recorded,
// identity and fingerprint kept), every other row converts, and the database
// reaches the current version.
func TestV3UpgradeQuarantinesAPayloadItCannotConvert(t *testing.T) {
	t.Parallel() // the server prints about 1 GB three times
	is := is.New(t)
	ctx := context.Background()
	db, pool := open(t, inboxtest.EmptyDatabase(t))
	m := migrator(t, db)
	_, err := m.UpTo(ctx, 2)
	is.NoErr(err)

	insert := func(msgID, status, payload string) inbox.ID {
		id := inboxtype.New()
		_, err := pool.Exec(ctx, `INSERT INTO pginbox_receipts (id, scope_kind, scope_id, source, consumer, message_id, event_type, schema_version,
				fingerprint, payload, status, completed_at)
			VALUES ($1, 'tenant', 't1', 's', 'c', $2, 'e', 1, $3, (`+payload+`), $4, CASE WHEN $4 = 'COMPLETED' THEN now() END)`,
			id, msgID, make([]byte, 32), status)
		is.NoErr(err)
		return id
	}
	const poison = `SELECT jsonb_agg('1e131071'::jsonb) FROM generate_series(1, 8201)`
	good := insert("good", "PENDING", `SELECT '{"n":1}'::jsonb`)
	pending := insert("poison-pending", "PENDING", poison)
	done := insert("poison-done", "COMPLETED", poison)

	_, err = m.Up(ctx)
	is.NoErr(err)
	cur, err := m.Current(ctx)
	is.NoErr(err)
	is.Equal(cur, schema.Version)

	type row struct {
		status, lastError string
		payload           *string
		purged            bool
		fingerprint       []byte
	}
	read := func(id inbox.ID) row {
		var r row
		var lastError *string
		is.NoErr(pool.QueryRow(ctx, `SELECT status, last_error, payload::text, payload_purged_at IS NOT NULL, fingerprint
			FROM pginbox_receipts_live WHERE id = $1`, id).Scan(&r.status, &lastError, &r.payload, &r.purged, &r.fingerprint))
		if lastError != nil {
			r.lastError = *lastError
		}
		return r
	}
	g := read(good)
	is.Equal(g.status, "PENDING")
	is.True(g.payload != nil && *g.payload == `{"n": 1}`) // jsonb's rendering, as for every v2 row

	p := read(pending)
	is.Equal(p.status, "DEAD")
	is.True(p.payload == nil && p.purged)
	is.True(strings.Contains(p.lastError, "schema v3 could not store this payload as JSON text"))
	is.Equal(len(p.fingerprint), 32)

	d := read(done)
	is.Equal(d.status, "COMPLETED") // it was handled; only its payload is gone
	is.True(d.payload == nil && d.purged)
	is.True(strings.Contains(d.lastError, "schema v3 could not store this payload as JSON text"))
}
