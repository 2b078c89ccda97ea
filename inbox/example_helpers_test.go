package inbox_test

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

// discardLogger keeps the examples' output to what they print.
var discardLogger = slog.New(slog.DiscardHandler)

// exampleSetup returns a pool on a fresh database with pginbox's schema, a
// client on it, and a function that closes both and drops the database.
func exampleSetup(cfg inbox.Config) (*pgxpool.Pool, *inbox.Client, func()) {
	ctx := context.Background()
	dsn, drop := exampleDatabase()
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		panic(err)
	}
	pcfg.MaxConns = 8 // a worker's handlers, its listener and claims, and Accept
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		panic(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = discardLogger
	}
	client, err := inbox.NewClient(pool, cfg)
	if err != nil {
		panic(err)
	}
	return pool, client, func() {
		client.Close()
		pool.Close()
		drop()
	}
}
