package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/outbox"
)

// outboxCmd is `inbox outbox <subcommand>`: the outbox's operations. Each
// subcommand is a command of its own (cmd_outbox_*.go), named "outbox NAME"
// so its help and errors read like a top-level command's.
var outboxCmd = &command{
	Name:    "outbox",
	Args:    "stats|list|show|requeue|purge [arguments] [flags]",
	Summary: "the outbox's events: stats, list, show, requeue DEAD ones, purge published history",
	Help: `
The outbox holds the events services emitted in their transactions until a
relay publishes them (package outbox). These commands read and repair it
across scopes (an event has the scope of the transaction that emitted it): with
tenancy enabled, connect as a role with BYPASSRLS.

Run ` + "`inbox help outbox <subcommand>`" + ` for a subcommand's flags.`,
}

// outboxGroup holds the subcommands, in the order a new user meets them.
var outboxGroup = newCommandGroup(outboxCmd, "stats", "list", "show", "requeue", "purge")

// outboxAdmin connects, checks the schema and returns the outbox's admin.
func outboxAdmin(ctx context.Context, e *env, d *dbFlags) (*outbox.Admin, func(), error) {
	pool, err := d.connect(ctx, e, true)
	if err != nil {
		return nil, nil, err
	}
	if err := checkOutboxVisible(ctx, pool); err != nil {
		pool.Close()
		return nil, nil, err
	}
	admin, err := outbox.NewAdmin(pool, outbox.AdminConfig{Logger: discardLogger})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return admin, pool.Close, nil
}

// errOutboxRestricted: row-level security would show this role no event, and
// an empty answer would read as "nothing to do".
var errOutboxRestricted = errors.New("row-level security hides the outbox's events from this role, and these commands work across tenants: " +
	"connect as a role with BYPASSRLS (`inbox tenancy grant ROLE --system`)")

func checkOutboxVisible(ctx context.Context, pool *pgxpool.Pool) error {
	var restricted bool
	if err := pool.QueryRow(ctx, "SELECT row_security_active('pginbox_outbox')").Scan(&restricted); err != nil {
		return fmt.Errorf("reading the outbox's row-level security: %w", err)
	}
	if restricted {
		return errOutboxRestricted
	}
	return nil
}
