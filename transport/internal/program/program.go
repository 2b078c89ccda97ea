// Package program is what the transport adapters' programs share: exit
// handling, the scope flag, and the inbox client on DATABASE_URL with
// shutdown on SIGINT/SIGTERM.
package program

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

// Main runs run and exits 1 with its error, prefixed by the program's name.
func Main(name string, run func() error) {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Scope is the tenant's scope, or the global scope for "".
func Scope(tenant string) inbox.Scope {
	if tenant == "" {
		return inbox.Global()
	}
	return inbox.Tenant(tenant)
}

// Open returns a context ended by SIGINT or SIGTERM and an inbox client for
// consumer on DATABASE_URL. Call done when finished.
func Open(consumer string) (ctx context.Context, client *inbox.Client, done func(), err error) {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		return nil, nil, nil, errors.New("DATABASE_URL is not set: point it at the database with the pginbox schema")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		stop()
		return nil, nil, nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	client, err = inbox.NewClient(pool, inbox.Config{Consumers: []string{consumer}})
	if err != nil {
		pool.Close()
		stop()
		return nil, nil, nil, err
	}
	return ctx, client, func() { pool.Close(); stop() }, nil
}
