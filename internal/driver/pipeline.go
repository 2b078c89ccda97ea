package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/db"
)

// Queue returns generated statements that are queued in b instead of run.
// Exec statements report success; a Query or QueryRow statement returns
// ErrQueued (use QueueQuery).
func Queue(b *pgx.Batch) *db.Queries { return db.New(batchQueue{b}) }

// ErrQueued ends a generated query function whose statement was queued
// instead of run.
var ErrQueued = errors.New("pginbox: internal: queued")

// QueueQuery queues, in b, the one Query or QueryRow statement f runs.
func QueueQuery(ctx context.Context, b *pgx.Batch, f func(q *db.Queries) error) {
	if err := f(db.New(batchQueue{b})); !errors.Is(err, ErrQueued) {
		panic(fmt.Sprintf("pginbox: internal: QueueQuery: %v", err))
	}
}

// batchQueue is a db.DBTX that queues each statement in a batch instead of
// running it.
type batchQueue struct{ b *pgx.Batch }

func (q batchQueue) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (q batchQueue) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	q.b.Queue(sql, args...)
	return nil, ErrQueued
}

func (q batchQueue) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	q.b.Queue(sql, args...)
	return ErrRow{ErrQueued}
}

// ErrRow is a pgx.Row whose Scan fails with its error.
type ErrRow struct {
	Err error // what Scan returns
}

// Scan returns the row's error.
func (r ErrRow) Scan(...any) error { return r.Err }

// FailedBatch is the results of a batch that was not sent (or was sent on a
// transaction that had ended).
type FailedBatch struct {
	Err error // what every result returns
}

// Exec returns the batch's error.
func (r FailedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, r.Err }

// Query returns the batch's error.
func (r FailedBatch) Query() (pgx.Rows, error) { return nil, r.Err }

// QueryRow returns a row whose Scan returns the batch's error.
func (r FailedBatch) QueryRow() pgx.Row { return ErrRow(r) }

// Close returns the batch's error.
func (r FailedBatch) Close() error { return r.Err }

// Tx returns nil: the batch ran in no transaction.
func (r FailedBatch) Tx() pgx.Tx { return nil }

// inTx reports whether b runs in a transaction already (a pgx.Tx).
func inTx(b Batcher) bool {
	_, ok := b.(pgx.Tx)
	return ok
}

// connOf returns the connection b sends on, or nil for a pool.
func connOf(b Batcher) *pgx.Conn {
	switch t := b.(type) {
	case *pgx.Conn:
		return t
	case interface{ Conn() *pgx.Conn }: // pgx.Tx, *pgxpool.Conn
		return t.Conn()
	}
	return nil
}

// readExecs reads n Exec results of br.
func readExecs(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}
