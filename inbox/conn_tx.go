package inbox

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/driver"
)

// connTx is a pgx.Tx over a pooled connection whose BEGIN was sent in the
// same round trip as the transaction's first statements (openQueries), so a
// handler transaction costs two round trips (open and start, commit) instead
// of the three pgx.Conn.BeginTx needs. It behaves as pgx's own transaction:
// savepoints for Begin, ErrTxClosed once ended, ErrTxCommitRollback when the
// server answers COMMIT with ROLLBACK. Ending it releases the connection.
type connTx struct {
	txStatements
	pc     *pgxpool.Conn
	sp     int64 // savepoints made so far: names them
	closed bool
}

// newConnTx returns the transaction opened (or about to be) on pc.
func newConnTx(pc *pgxpool.Conn) *connTx {
	t := &connTx{pc: pc}
	t.txStatements = txStatements{conn: pc.Conn(), ended: func() bool { return t.closed }}
	return t
}

// txStatements sends a transaction's statements on its connection until the
// transaction (or savepoint) has ended, as pgx's transactions do.
type txStatements struct {
	conn  *pgx.Conn
	ended func() bool
}

func (t txStatements) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if t.ended() {
		return 0, pgx.ErrTxClosed
	}
	return t.conn.CopyFrom(ctx, table, cols, src)
}

func (t txStatements) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.ended() {
		return driver.FailedBatch{Err: pgx.ErrTxClosed}
	}
	return t.conn.SendBatch(ctx, b)
}

func (t txStatements) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if t.ended() {
		return nil, pgx.ErrTxClosed
	}
	return t.conn.Prepare(ctx, name, sql)
}

func (t txStatements) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.ended() {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t txStatements) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.ended() {
		return nil, pgx.ErrTxClosed
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t txStatements) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.ended() {
		return driver.ErrRow{Err: pgx.ErrTxClosed}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t txStatements) Conn() *pgx.Conn { return t.conn }

// LargeObjects needs a transaction made by pgx (its type has no exported
// constructor): one is opened lazily over the same connection with a
// statement that does nothing, and never ended by itself.
func (t txStatements) LargeObjects() pgx.LargeObjects {
	lo, err := t.conn.BeginTx(context.Background(), pgx.TxOptions{BeginQuery: "SELECT"})
	if err != nil {
		return pgx.LargeObjects{} // the connection is broken: every use fails
	}
	return lo.LargeObjects()
}

func (t *connTx) end() {
	t.closed = true
	t.pc.Release() // a connection left in a transaction is destroyed, not reused
}

func (t *connTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	return t.savepoint(ctx)
}

func (t *connTx) savepoint(ctx context.Context) (pgx.Tx, error) {
	t.sp++
	sp := &savepointTx{root: t, name: "sp_" + strconv.FormatInt(t.sp, 10)}
	sp.txStatements = txStatements{conn: t.conn, ended: func() bool { return sp.closed || t.closed }}
	if _, err := t.conn.Exec(ctx, "SAVEPOINT "+sp.name); err != nil {
		return nil, err
	}
	return sp, nil
}

func (t *connTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	defer t.end()
	tag, err := t.conn.Exec(ctx, "COMMIT")
	if err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// commitAfter runs b's statements and COMMIT in one round trip. A statement
// of b that fails makes the server skip the rest of the pipeline, COMMIT
// included: nothing commits, and the server's error is returned.
func (t *connTx) commitAfter(ctx context.Context, b *pgx.Batch) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	defer t.end()
	n := b.Len()
	b.Queue("COMMIT")
	br := t.conn.SendBatch(ctx, b)
	var err error
	for range n {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

func (t *connTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	defer t.end()
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}

// savepointTx is a savepoint of a connTx, as pgx's nested transactions are.
type savepointTx struct {
	txStatements
	root   *connTx
	name   string
	closed bool
}

func (s *savepointTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if s.closed {
		return nil, pgx.ErrTxClosed
	}
	return s.root.Begin(ctx)
}

func (s *savepointTx) Commit(ctx context.Context) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	s.closed = true
	_, err := s.root.Exec(ctx, "RELEASE SAVEPOINT "+s.name)
	return err
}

func (s *savepointTx) Rollback(ctx context.Context) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	s.closed = true
	_, err := s.root.Exec(ctx, "ROLLBACK TO SAVEPOINT "+s.name)
	return err
}

// openTx opens a handler transaction with r's scope, where r's statements
// run, in one round trip and returns it with its server process ID.
func (w *Worker) openTx(ctx context.Context, r claimed) (*connTx, uint32, error) {
	pc, err := w.on(w.pool, r).Acquire(ctx)
	if err != nil {
		return nil, 0, err
	}
	tx := newConnTx(pc)
	pid, err := w.drv.Known().OpenTx(ctx, tx.conn, r.Identity.Scope, w.txLimitMs)
	if err != nil {
		tx.Rollback(context.Background())
		return nil, 0, err
	}
	return tx, pid, nil
}
