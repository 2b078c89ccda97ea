package inbox_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
)

// PgBouncer in transaction mode needs the simple protocol or unnamed statements;
// accept, duplicate detection and processing must work in every pgx exec mode.
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

			var meta map[string]string
			w := newWorker(t, pool, registry(t, handler.Typed(handler.DecodeOptions{AllowUnknownFields: true},
				func(ctx context.Context, m *handler.Msg, p orderCreated) error {
					meta = m.Metadata
					return projectOrder(ctx, m, p)
				})), inbox.WorkerConfig{PollOnly: true})
			n, err := w.Drain(ctx)
			is.NoErr(err)
			is.Equal(n, 1)
			is.Equal(businessRows(t, pool), 1)
			is.Equal(stateOf(t, pool, first.ID).Status, "COMPLETED")
			is.Equal(meta["k"], "v")
		})
	}
}
