package inboxtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// SetState moves a tenant's receipt through every state on one server and
// on Citus, where each of its writes must run on the scope's node (Citus
// refuses a write joined across shards or with a volatile function).
func TestSetState(t *testing.T) {
	t.Parallel()
	for name, dsn := range map[string]func(testing.TB) string{"one server": inboxtest.Database, "citus": inboxtest.CitusDatabase} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			ctx := context.Background()
			pool, err := pgxpool.New(ctx, dsn(t))
			is.NoErr(err)
			t.Cleanup(pool.Close)
			c, err := inbox.NewClient(pool, inbox.Config{})
			is.NoErr(err)
			res, err := c.Accept(ctx, inbox.Message{
				Identity:  inbox.Identity{Scope: inbox.Tenant("tenant-s"), Source: "shop", Consumer: "orders", MessageID: "m-1"},
				EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{"n": 1},
			})
			is.NoErr(err)
			state := func() (status string, attempts int, lastError *string, leased bool) {
				is.NoErr(pool.QueryRow(ctx, `SELECT status, attempts, last_error, claim_token IS NOT NULL AND lease_expires_at IS NOT NULL
					FROM pginbox_receipts_live WHERE id = $1`, res.ID).Scan(&status, &attempts, &lastError, &leased))
				return
			}

			inboxtest.SetState(t, pool, res.ID, "status = 'PROCESSING', attempts = 2")
			st, n, _, leased := state()
			is.Equal(st, "PROCESSING")
			is.Equal(n, 2)
			is.True(leased)

			inboxtest.SetState(t, pool, res.ID, "status = 'DEAD', last_error = $2", "boom")
			st, n, e, leased := state()
			is.Equal(st, "DEAD")
			is.Equal(n, 2)
			is.Equal(*e, "boom")
			is.True(!leased)

			inboxtest.SetState(t, pool, res.ID, "status = 'COMPLETED', completed_at = now() - interval '2 days', attempts = 3")
			st, n, _, _ = state()
			is.Equal(st, "COMPLETED")
			is.Equal(n, 3) // settled: kept on the receipt
			var queued int
			is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_work WHERE receipt_id = $1", res.ID).Scan(&queued))
			is.Equal(queued, 0)

			inboxtest.SetState(t, pool, res.ID, "status = 'RETRYABLE', available_at = now() + interval '1 hour'")
			st, n, _, _ = state()
			is.Equal(st, "RETRYABLE")
			is.Equal(n, 3)
		})
	}
}
