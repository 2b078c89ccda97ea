package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// TestCitusCommandsWithoutTenant: on Citus, requeue, replay and purge
// without --tenant (the operator's view of every scope) work.
func TestCitusCommandsWithoutTenant(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn := inboxtest.CitusDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	is.NoErr(err)
	defer pool.Close()
	c, err := inbox.NewClient(pool, inbox.Config{Logger: discardLogger})
	is.NoErr(err)
	accept := func(tenant, id string) inbox.ID {
		res, err := c.Accept(ctx, inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant(tenant), Source: "shop", Consumer: "orders", MessageID: id},
			EventType: "order.placed", SchemaVersion: 1, Payload: map[string]string{"orderId": id},
		})
		is.NoErr(err)
		return res.ID
	}
	dead, done := accept("tenant-a", "bad"), accept("tenant-b", "good")
	reg := handler.NewRegistry()
	is.NoErr(reg.Register(handler.Key{Consumer: "orders", EventType: "order.placed", SchemaVersion: 1},
		func(ctx context.Context, m *handler.Msg) error {
			if m.MessageID == "bad" {
				return handler.Permanent(errors.New("bad"))
			}
			return nil
		}))
	w, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{"orders"}, Logger: slog.New(slog.DiscardHandler)})
	is.NoErr(err)
	_, err = w.Drain(ctx)
	is.NoErr(err)
	version := func(id inbox.ID) string {
		var v int64
		is.NoErr(pool.QueryRow(ctx, "SELECT version FROM pginbox_receipts_live WHERE id = $1", id).Scan(&v))
		return fmt.Sprint(v)
	}

	environ := map[string]string{"DATABASE_URL": dsn, "USER": "ops"}
	code, _, stderr := runIn(t, environ, "requeue", dead.String(), "--version", version(dead), "--reason", "fixed")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	code, _, stderr = runIn(t, environ, "replay", done.String(), "--version", version(done), "--reason", "rebuild")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)

	// Completed 40 days ago (a parameter: Citus refuses now() in a multi-shard update).
	old := time.Now().Add(-40 * 24 * time.Hour)
	_, err = pool.Exec(ctx, "UPDATE pginbox_receipts SET created_at = $2, completed_at = $2 WHERE scope_id = 'tenant-b' AND id = $1", done, old)
	is.NoErr(err)
	code, stdout, stderr := runIn(t, environ, "purge", "--older-than", "30d", "--json")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, `"purged": 1,`)) // the original; its replay is not completed
	var purged bool
	is.NoErr(pool.QueryRow(ctx, "SELECT payload IS NULL FROM pginbox_receipts WHERE id = $1", done).Scan(&purged))
	is.True(purged)
}
