package citustest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Connections counts the connections a pool's sessions opened to the worker
// nodes (citus_stat_counters, kept per database on the coordinator).
type Connections struct {
	pool *pgxpool.Pool
	// Workers is the number of worker nodes.
	Workers int
}

// CountingPool connects to the Citus database dsn with at most maxConns
// connections whose sessions count the connections they open to the worker
// nodes, and with Citus's slow start off: a statement with many shards on a
// node then opens a connection per pending shard read at once, so a
// statement that should keep to the one cached connection per node shows it.
func CountingPool(t testing.TB, dsn string, maxConns int32) (*pgxpool.Pool, *Connections) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	cfg.ConnConfig.RuntimeParams["citus.enable_stat_counters"] = "on"
	cfg.ConnConfig.RuntimeParams["citus.executor_slow_start_interval"] = "0"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c := &Connections{pool: pool}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_dist_node
		WHERE noderole = 'primary' AND groupid <> 0`).Scan(&c.Workers); err != nil {
		t.Fatal(err)
	}
	return pool, c
}

// Opened returns how many connections to the worker nodes the database's
// counting sessions have opened so far.
func (c *Connections) Opened(t testing.TB) int64 {
	t.Helper()
	var n int64
	if err := c.pool.QueryRow(context.Background(), `SELECT connection_establishment_succeeded
		FROM citus_stat_counters WHERE name = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
