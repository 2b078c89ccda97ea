package inbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/citustest"
)

// On Citus a scope's claim is one command on the scope's node, committed
// there on its own: no BEGIN, transaction id and COMMIT around it (a
// setting in a coordinator's transaction would not reach the node anyway).
func TestCitusClaimIsOneCommandOnTheNode(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.CitusDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	is.NoErr(err)
	t.Cleanup(pool.Close)
	sys, rc := citustest.Pool(t, dsn) // the claims' pool, its commands logged
	client, err := inbox.NewClient(pool, inbox.Config{})
	is.NoErr(err)
	for i := range 8 {
		_, err := client.Accept(ctx, inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant(fmt.Sprintf("tenant-%d", i%4)), Source: "shop", Consumer: "orders", MessageID: fmt.Sprint(i)},
			EventType: "order.created", SchemaVersion: 1, Payload: map[string]any{},
		})
		is.NoErr(err)
	}
	reg := handler.NewRegistry()
	is.NoErr(reg.Register(handler.Key{Consumer: "orders", EventType: "order.created", SchemaVersion: 1},
		func(context.Context, *handler.Msg) error { return nil }))
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Consumers: []string{"orders"}, SystemPool: sys, Logger: slog.New(slog.DiscardHandler),
	})
	is.NoErr(err)
	n, err := w.Drain(ctx)
	is.NoErr(err)
	is.Equal(n, 8)

	claims := 0
	for _, l := range rc.Lines() {
		if strings.HasPrefix(l, "WITH due AS") && strings.Contains(l, "SKIP LOCKED") {
			claims++
		}
		if strings.Contains(l, "assign_distributed_transaction_id") || strings.HasPrefix(l, "COMMIT") {
			t.Errorf("the worker's claims began or committed a transaction on a node: %s", l)
		}
	}
	is.True(claims > 0) // the log captured the claims
}
