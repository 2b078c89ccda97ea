package inbox_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
)

// PgBouncer in transaction mode needs the simple protocol or unnamed statements;
// accept, duplicate detection, processing, an emit from the handler and a
// replay must work in every pgx exec mode, and so must the foreign keys that
// tie a work row, an outbox event and an audit row to their receipt's scope
// (Accept writes the receipt and its work row in one statement).
func TestAcceptAndProcessInEveryExecMode(t *testing.T) {
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
			pool, _ := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.DefaultQueryExecMode = mode })
			setupBusiness(t, pool)
			c := newClient(t, pool, inbox.Config{})

			msg := orderMsg("evt-1", map[string]any{"orderId": "o-1", "big": 9007199254740993})
			msg.Metadata = map[string]string{"k": "v"}
			first, err := c.Accept(ctx, msg)
			is.NoErr(err)
			is.Equal(first.Outcome, inbox.Accepted)
			dup, err := c.Accept(ctx, msg)
			is.NoErr(err)
			is.Equal(dup.Outcome, inbox.Duplicate)
			is.Equal(dup.ID, first.ID)

			var (
				mu   sync.Mutex // Drain runs handlers concurrently
				meta map[string]string
			)
			w := newWorker(t, pool, registry(t, handler.Typed(handler.DecodeOptions{AllowUnknownFields: true},
				func(ctx context.Context, m *handler.Msg, p orderCreated) error {
					if p.OrderID == "o-1" {
						mu.Lock()
						meta = m.Metadata
						mu.Unlock()
					}
					if _, err := outbox.Emit(ctx, m.Tx, outbox.Event{Type: "order.projected", SchemaVersion: 1, Source: "s", Destination: "d", Payload: p}); err != nil {
						return err
					}
					// A replay runs the handler again: the projection is idempotent.
					_, err := m.Tx.Exec(ctx, "INSERT INTO order_projection (tenant_id, order_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", m.Scope.ID, p.OrderID)
					return err
				})), inbox.WorkerConfig{PollOnly: true})
			n, err := w.Drain(ctx)
			is.NoErr(err)
			is.Equal(n, 1)
			is.Equal(businessRows(t, pool), 1)
			is.Equal(stateOf(t, pool, first.ID).Status, "COMPLETED")
			mu.Lock()
			is.Equal(meta["k"], "v")
			mu.Unlock()
			is.Equal(len(inboxtest.Emitted(t, pool, first.ID)), 1) // linked to its receipt

			batch := []inbox.Message{orderMsg("evt-2", map[string]any{"orderId": "o-2"}), orderMsg("evt-3", map[string]any{"orderId": "o-3"})}
			batch[1].Scope = inbox.Global()
			items, err := c.AcceptBatch(ctx, batch)
			is.NoErr(err)
			is.Equal(items[0].Outcome, inbox.Accepted)
			is.Equal(items[1].Outcome, inbox.Accepted)

			admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: testLogger(t)})
			is.NoErr(err)
			done, err := admin.Operator().Get(ctx, first.ID)
			is.NoErr(err)
			rp, err := admin.Operator().Replay(ctx, first.ID, inbox.ChangeParams{ExpectedVersion: done.Version, Actor: "ops", Reason: "again"})
			is.NoErr(err)
			n, err = w.Drain(ctx)
			is.NoErr(err)
			is.Equal(n, 3)
			is.Equal(stateOf(t, pool, rp.NewID).Status, "COMPLETED")
			is.Equal(businessRows(t, pool), 3)
			is.Equal(len(inboxtest.Emitted(t, pool, rp.NewID)), 1)
		})
	}
}
