package inbox_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
)

// A scope set at session level (SET without LOCAL) would stay on the pooled
// connection for whoever borrows it next; with ResetScopeOnRelease the pool
// clears it when the connection comes back.
func ExampleResetScopeOnRelease() {
	ctx := context.Background()
	dsn, drop := exampleDatabase()
	defer drop()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		panic(err)
	}
	cfg.MaxConns = 1 // the next borrower gets the same connection
	inbox.ResetScopeOnRelease(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	// Code that should have used inbox.ApplyScope in a transaction.
	if _, err := pool.Exec(ctx, "SET pginbox.tenant = 'acme'"); err != nil {
		panic(err)
	}
	var tenant string
	if err := pool.QueryRow(ctx, "SELECT current_setting('pginbox.tenant', true)").Scan(&tenant); err != nil {
		panic(err)
	}
	fmt.Printf("the next borrower's tenant: %q\n", tenant)

	// Output:
	// the next borrower's tenant: ""
}
