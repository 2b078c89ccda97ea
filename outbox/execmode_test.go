package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
)

// PgBouncer in transaction mode needs the simple protocol or unnamed
// statements: emitting, claiming, marking, failing, releasing, recovering,
// requeueing and purging must work in every pgx exec mode.
func TestOutboxInEveryExecMode(t *testing.T) {
	t.Parallel()
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
			ctx := context.Background()
			pool := inboxtest.Pool(t, func(c *pgxpool.Config) { c.ConnConfig.DefaultQueryExecMode = mode })
			ev := event("A", 1)
			ev.Payload = map[string]any{"big": 9007199254740993, "s": "é"}
			ev.Metadata = map[string]string{"k": "v"}
			ids := emit(t, pool, ev, event("A", 2), event("", 3))
			rec := &recorder{fail: func(m outbox.Message) error {
				if m.ID == ids[0] && m.Attempt == 1 {
					return errors.New("once")
				}
				return nil
			}}
			r := newRelay(t, pool, rec, outbox.RelayConfig{PollOnly: true, Backoff: func(int) time.Duration { return 0 }})
			is.Equal(drain(t, r), 3) // a failure, a release, then all three
			msgs := rec.messages()
			is.Equal(string(msgs[0].Payload), `{"big":9007199254740993,"s":"é"}`)
			is.Equal(msgs[0].Metadata, map[string]string{"k": "v"})

			_, err := pool.Exec(ctx, `UPDATE pginbox_outbox SET status = 'PUBLISHING', published_at = NULL, claim_token = gen_random_uuid(),
				lease_expires_at = now() - interval '1 second' WHERE id = $1`, ids[2])
			is.NoErr(err)
			n, err := r.RecoverExpired(ctx)
			is.NoErr(err)
			is.Equal(n, 1)
			_, err = pool.Exec(ctx, "UPDATE pginbox_outbox SET status = 'DEAD' WHERE id = $1", ids[2])
			is.NoErr(err)
			admin := newAdmin(t, pool)
			got, err := admin.Get(ctx, ids[2])
			is.NoErr(err)
			_, err = admin.Requeue(ctx, ids[2], got.Version)
			is.NoErr(err)
			is.Equal(drain(t, r), 1)
			st, err := admin.Stats(ctx, outbox.StatsParams{IncludePublished: true})
			is.NoErr(err)
			is.Equal(st.Destinations[0].Published, int64(3))
			page, err := admin.List(ctx, outbox.ListParams{After: ids[0], Statuses: []outbox.Status{outbox.StatusPublished}})
			is.NoErr(err)
			is.Equal(len(page.Events), 2)
			res, err := admin.Purge(ctx, outbox.PurgeParams{OlderThan: time.Nanosecond})
			is.NoErr(err)
			is.Equal(res.Deleted, int64(3))
		})
	}
}
