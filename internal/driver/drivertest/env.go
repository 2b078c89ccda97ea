package drivertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/driver"
)

// env is one case's world: its own database, a superuser pool on it (which
// row-level security never restricts) and the driver driver.For found there.
type env struct {
	*testing.T
	ctx  context.Context
	dsn  string
	pool *pgxpool.Pool
	drv  driver.Driver
	// nodes, with Harness.OnNodes, are where claims run.
	nodes *driver.Nodes
}

func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	e := &env{T: t, ctx: t.Context()}
	e.dsn = h.Database(t)
	e.pool = e.newPool(e.dsn, "")
	drv, err := driver.For(e.ctx, e.pool)
	if err != nil {
		t.Fatalf("driver.For: %v", err)
	}
	if drv.Name() != h.Driver {
		t.Fatalf("driver.For found %q on the harness's database, want %q", drv.Name(), h.Driver)
	}
	e.drv = drv
	if h.OnNodes {
		nodes, err := driver.ConnectNodes(e.ctx, e.pool, driver.NodesConfig{})
		e.must(err, "connecting to the nodes")
		t.Cleanup(nodes.Close)
		e.nodes = nodes
	}
	return e
}

// newPool returns a pool on dsn, as role when set, closed when the case
// ends.
func (e *env) newPool(dsn, role string) *pgxpool.Pool {
	e.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		e.Fatal(err)
	}
	cfg.MaxConns = 8
	if role != "" {
		cfg.ConnConfig.User = role
	}
	pool, err := pgxpool.NewWithConfig(e.ctx, cfg)
	if err != nil {
		e.Fatal(err)
	}
	e.Cleanup(pool.Close)
	return pool
}

// must fails the case on err, saying what failed.
func (e *env) must(err error, what string) {
	e.Helper()
	if err != nil {
		e.Fatalf("%s: %v", what, err)
	}
}

// exec runs sql as the superuser.
func (e *env) exec(sql string, args ...any) {
	e.Helper()
	if _, err := e.pool.Exec(e.ctx, sql, args...); err != nil {
		e.Fatalf("%s: %v", sql, err)
	}
}

// count runs a count(*) query as the superuser.
func (e *env) count(sql string, args ...any) int {
	e.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, sql, args...).Scan(&n); err != nil {
		e.Fatalf("%s: %v", sql, err)
	}
	return n
}

// conn acquires a connection of pool. done gives it back, after rolling
// back a transaction left open on it; it runs when the case ends if not
// before, and a second call does nothing.
func (e *env) conn(pool *pgxpool.Pool) (c *pgxpool.Conn, done func()) {
	e.Helper()
	c, err := pool.Acquire(e.ctx)
	e.must(err, "acquiring a connection")
	var once sync.Once
	done = func() {
		once.Do(func() {
			if !c.Conn().IsClosed() && c.Conn().PgConn().TxStatus() != 'I' {
				_, _ = c.Exec(context.Background(), "ROLLBACK")
			}
			c.Release()
		})
	}
	e.Cleanup(done)
	return c, done
}

// begin begins a transaction on pool, rolled back when the case ends unless
// it ended before.
func (e *env) begin(pool *pgxpool.Pool) pgx.Tx {
	e.Helper()
	tx, err := pool.Begin(e.ctx)
	e.must(err, "begin")
	e.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// sqlState returns the SQLSTATE of err, "" for none.
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Scopes the cases use. Tenant IDs sort after the global scope's "".
var (
	tenantA = inboxtype.Tenant("tenant-a")
	tenantB = inboxtype.Tenant("tenant-b")
	tenantC = inboxtype.Tenant("tenant-c")
	global  = inboxtype.Global()
)

// txScope reads the scope settings of tx (on Citus, the coordinator's).
func (e *env) txScope(tx pgx.Tx) (tenant, global string) {
	e.Helper()
	err := tx.QueryRow(e.ctx, `SELECT coalesce(current_setting('pginbox.tenant', true), ''),
		coalesce(current_setting('pginbox.global', true), '')`).Scan(&tenant, &global)
	e.must(err, "reading the transaction's scope")
	return tenant, global
}

// listener is a session listening on a channel. Reading up to a marker the
// suite notifies itself tells what arrived before it without waiting for
// anything that might not come: notifications of committed transactions
// arrive in commit order.
type listener struct {
	e       *env
	conn    *pgx.Conn
	channel string
}

func (e *env) listen(channel string) *listener {
	e.Helper()
	conn, err := pgx.Connect(e.ctx, e.dsn)
	e.must(err, "connecting the listener")
	e.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(e.ctx, "LISTEN "+channel)
	e.must(err, "LISTEN")
	return &listener{e: e, conn: conn, channel: channel}
}

// since returns the payloads notified on the channel since the last call.
func (l *listener) since() []string {
	l.e.Helper()
	marker := "drivertest-marker-" + inboxtype.New().String()
	l.e.exec("SELECT pg_notify($1, $2)", l.channel, marker)
	ctx, cancel := context.WithTimeout(l.e.ctx, time.Minute)
	defer cancel()
	var got []string
	for {
		n, err := l.conn.WaitForNotification(ctx)
		l.e.must(err, "waiting for the marker notification")
		if n.Payload == marker {
			return got
		}
		got = append(got, n.Payload)
	}
}
