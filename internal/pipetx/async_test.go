package pipetx_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/pipetx"
)

func TestMain(m *testing.M) { inboxtest.Main(m) }

// batches counts the batches sent and the statements sent on their own.
type batches struct{ sent, single int }

func (b *batches) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	b.single++
	return ctx
}
func (b *batches) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (b *batches) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	b.sent++
	return ctx
}
func (b *batches) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (b *batches) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func connect(t *testing.T, tracer pgx.QueryTracer) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(inboxtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tracer = tracer
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(context.Background(), `CREATE TABLE t (
		n int CONSTRAINT t_n UNIQUE DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	return conn
}

func count(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A statement, its transaction's setting and its commit are one round trip,
// and what it wrote is committed when its rows have been read.
func TestAsyncIsOneRoundTripAndCommits(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	trace := &batches{}
	conn := connect(t, trace)
	// The test cluster may run without synchronous commits: start with them.
	if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}
	*trace = batches{} // not the setup's statements
	a := pipetx.Async{Conn: conn}

	var setting string
	var n int
	is.NoErr(a.QueryRow(ctx, "INSERT INTO t VALUES (1), (2) RETURNING current_setting('synchronous_commit'), n").Scan(&setting, &n))
	is.Equal(setting, "off")
	tag, err := a.Exec(ctx, "INSERT INTO t VALUES (3)")
	is.NoErr(err)
	is.Equal(tag.RowsAffected(), int64(1))
	is.Equal(trace.sent, 2)
	is.Equal(trace.single, 0)
	is.Equal(conn.PgConn().TxStatus(), byte('I'))
	is.Equal(count(t, conn), 3)
	var after string
	is.NoErr(conn.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&after))
	is.Equal(after, "on") // local to its transaction
}

// With GenericPlan, the statement runs on a generic plan, even where the
// session asks for custom plans, and the setting ends with its transaction.
func TestAsyncGenericPlan(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	conn := connect(t, nil)
	_, err := conn.Exec(ctx, "SET plan_cache_mode = force_custom_plan")
	is.NoErr(err)
	const stmt = "INSERT INTO t SELECT $1::int WHERE $1::int > 0 -- generic plan test"
	n := 0
	for _, generic := range []bool{false, true} {
		for range 3 {
			n++
			_, err := pipetx.Async{Conn: conn, GenericPlan: generic}.Exec(ctx, stmt, n)
			is.NoErr(err)
		}
		var g, c int64
		is.NoErr(conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
			WHERE statement = $1`, stmt).Scan(&g, &c))
		if generic {
			is.Equal([]int64{g, c}, []int64{3, 3}) // the second three ran generic
		} else {
			is.Equal([]int64{g, c}, []int64{0, 3})
		}
	}
	var mode string
	is.NoErr(conn.QueryRow(ctx, "SELECT current_setting('plan_cache_mode')").Scan(&mode))
	is.Equal(mode, "force_custom_plan")
}

// A statement that fails rolls its transaction back and leaves the
// connection ready for the next one.
func TestAsyncStatementErrorRollsBack(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	conn := connect(t, nil)
	a := pipetx.Async{Conn: conn}

	_, err := readAll(a.Query(ctx, "INSERT INTO t SELECT g FROM generate_series(1, 3) g RETURNING 10 / (3 - n)"))
	var pgErr *pgconn.PgError
	is.True(errors.As(err, &pgErr))
	is.Equal(pgErr.Code, "22012") // division by zero
	is.Equal(conn.PgConn().TxStatus(), byte('I'))
	is.Equal(count(t, conn), 0)
	_, err = a.Exec(ctx, "INSERT INTO t VALUES (1)")
	is.NoErr(err)
	is.Equal(count(t, conn), 1)
}

// A COMMIT the server refuses (a deferred constraint) fails the statement's
// read, although its rows came back: nothing was committed.
func TestAsyncRefusedCommitFailsTheRead(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	conn := connect(t, nil)
	a := pipetx.Async{Conn: conn}

	got, err := readAll(a.Query(ctx, "INSERT INTO t VALUES (7), (7) RETURNING n"))
	is.Equal(got, 2)
	var pgErr *pgconn.PgError
	is.True(errors.As(err, &pgErr))
	is.Equal(pgErr.Code, "23505")
	_, err = a.Exec(ctx, "INSERT INTO t VALUES (8), (8)")
	is.True(errors.As(err, &pgErr))
	is.Equal(pgErr.Code, "23505")
	is.Equal(conn.PgConn().TxStatus(), byte('I'))
	is.Equal(count(t, conn), 0)
}

// readAll reads every row and returns how many there were and the error of
// the query or of the read.
func readAll(rows pgx.Rows, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// FanOut runs each statement on a connection of its pool, with the Citus
// settings local to its transaction (placeholders where Citus is not
// loaded), and gives the connection back when the rows end or the statement
// fails.
func TestFanOutReleasesItsConnection(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, inboxtest.Database(t))
	is.NoErr(err)
	t.Cleanup(pool.Close)
	f := pipetx.FanOut{Pool: pool}

	var size, opens string
	is.NoErr(f.QueryRow(ctx, "SELECT current_setting('citus.max_adaptive_executor_pool_size'), current_setting('citus.select_opens_transaction_block')").Scan(&size, &opens))
	is.Equal(size, "1")
	is.Equal(opens, "off")
	is.Equal(pool.Stat().AcquiredConns(), int32(0))

	rows, err := f.Query(ctx, "SELECT generate_series(1, 3)")
	is.NoErr(err)
	n := 0
	for rows.Next() {
		n++
	}
	is.NoErr(rows.Err())
	is.Equal(n, 3)
	is.Equal(pool.Stat().AcquiredConns(), int32(0))

	_, err = f.Exec(ctx, "SELECT 1/0")
	var pgErr *pgconn.PgError
	is.True(errors.As(err, &pgErr))
	is.Equal(pgErr.Code, "22012")
	is.Equal(pool.Stat().AcquiredConns(), int32(0))
	var after string
	is.NoErr(pool.QueryRow(ctx, "SELECT coalesce(current_setting('citus.max_adaptive_executor_pool_size', true), '')").Scan(&after))
	is.True(after != "1") // local to the transaction
}
