package pipetx

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// FanOut is a db.DBTX for the discovery reads that Citus runs on every shard:
// each statement runs as Async with OneConnPerNode, on a connection acquired
// from Pool for it. On one server it costs a BEGIN and a COMMIT in the same
// round trip.
type FanOut struct {
	Pool *pgxpool.Pool // a connection per statement comes from it
}

// Exec runs sql as Async.Exec on a connection of its own.
func (f FanOut) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	conn, err := f.Pool.Acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer conn.Release()
	return Async{Conn: conn.Conn(), OneConnPerNode: true}.Exec(ctx, sql, args...)
}

// Query runs sql as Async.Query on a connection of its own, released once
// the rows are read (or closed).
func (f FanOut) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	conn, err := f.Pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := Async{Conn: conn.Conn(), OneConnPerNode: true}.Query(ctx, sql, args...)
	if err != nil {
		conn.Release()
		return nil, err
	}
	return EndRows(rows, func() error { conn.Release(); return nil }), nil
}

// QueryRow is Query for one row.
func (f FanOut) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return FirstRow(f.Query(ctx, sql, args...))
}
