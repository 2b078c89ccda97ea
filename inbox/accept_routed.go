package inbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
)

// acceptRouted is Accept's insert on Citus. ReceiptAccept's CTE is pulled
// through the coordinator, which opens a connection to every worker node, so
// one node down would stop every tenant's accepts. ReceiptAcceptRouted calls
// pginbox_accept, which Citus hands whole to the scope's node when it runs
// outside a transaction: one statement on the coordinator, both inserts and
// a one-phase commit on that node. With the scope for row-level security
// (withScope) it runs in a transaction of its own (scoped), where Citus
// routes each insert instead.
//
// The wake-up (ReceiptNotify, on the coordinator) follows the commit in a
// round trip of its own, for a new receipt only. If it fails, the receipt is
// accepted all the same and the workers find it when they next poll.
//
// It returns pgx.ErrNoRows when the identity exists, as ReceiptAccept does.
func acceptRouted(ctx context.Context, conn *pgxpool.Conn, d *draft, notify, withScope bool) (db.ReceiptAcceptRow, error) {
	var dbtx db.DBTX = conn
	if withScope {
		dbtx = scoped(conn, d.identity.Scope, true)
	}
	row, err := db.New(dbtx).ReceiptAcceptRouted(ctx, d.acceptRoutedParams())
	if err != nil {
		return db.ReceiptAcceptRow{}, err
	}
	res := db.ReceiptAcceptRow{ID: row.ID, Status: row.Status}
	if notify {
		res.Notified = db.New(conn).ReceiptNotify(ctx, []string{d.identity.Consumer}) == nil
	}
	return res, nil
}

// acceptRoutedTx is AcceptTx's insert on Citus: ReceiptAcceptRouted and the
// wake-up in the caller's transaction tx (which has the scope), sent as one
// pipeline; the wake-up reaches the workers when tx commits. A duplicate
// leaves tx usable, as ReceiptAccept's does.
func acceptRoutedTx(ctx context.Context, tx pgx.Tx, d *draft) (db.ReceiptAcceptRow, error) {
	b := &pgx.Batch{}
	queueQuery(ctx, b, func(q *db.Queries) error {
		_, err := q.ReceiptAcceptRouted(ctx, d.acceptRoutedParams())
		return err
	})
	_ = db.New(batchQueue{b}).ReceiptNotify(ctx, []string{d.identity.Consumer})
	br := tx.SendBatch(ctx, b)
	var row db.ReceiptAcceptRow
	err := br.QueryRow().Scan(&row.ID, &row.Status)
	row.Notified = err == nil
	_, nerr := br.Exec()
	if err == nil || errors.Is(err, pgx.ErrNoRows) {
		err = cmp.Or(nerr, err) // a failed insert fails the wake-up too: keep the first error
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return db.ReceiptAcceptRow{}, err
	}
	return row, nil
}

// acceptRoutedParams are ReceiptAcceptRouted's arguments for d.
func (d *draft) acceptRoutedParams() db.ReceiptAcceptRoutedParams {
	p := d.acceptParams(false)
	return db.ReceiptAcceptRoutedParams{
		ID: p.ID, ScopeKind: p.ScopeKind, ScopeID: p.ScopeID, Source: p.Source,
		Consumer: p.Consumer, MessageID: p.MessageID, EventType: p.EventType,
		SchemaVersion: p.SchemaVersion, Fingerprint: p.Fingerprint, Payload: d.payload,
		Metadata: p.Metadata, MaxAttempts: p.MaxAttempts,
	}
}

// errQueued ends a generated query function whose statement queryQueue
// queued instead of running.
var errQueued = errors.New("pginbox: internal: queued")

// queueQuery queues the one Query or QueryRow statement f runs, in b.
func queueQuery(ctx context.Context, b *pgx.Batch, f func(q *db.Queries) error) {
	if err := f(db.New(queryQueue{b})); !errors.Is(err, errQueued) {
		panic(fmt.Sprintf("pginbox: internal: queueQuery: %v", err))
	}
}

// queryQueue is a db.DBTX that queues a Query or QueryRow in a batch instead
// of running it.
type queryQueue struct{ b *pgx.Batch }

func (q queryQueue) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("pginbox: internal: queryQueue queues Query and QueryRow only")
}

func (q queryQueue) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	q.b.Queue(sql, args...)
	return nil, errQueued
}

func (q queryQueue) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	q.b.Queue(sql, args...)
	return errRow{errQueued}
}
