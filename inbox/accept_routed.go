package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
)

// acceptRouted is Accept's first statement on Citus. ReceiptAccept's CTE is
// pulled through the coordinator, which opens a connection to every worker
// node, so one node down would stop every tenant's accepts. Here the receipt
// (ReceiptInsertRouted) and its queue row (ReceiptQueueRouted, read back by
// ReceiptQueuedRouted) are statements routed to the scope's node, with the wake-up (ReceiptNotify)
// on the coordinator, in one explicit transaction sent as one pipeline: one
// round trip, and a commit on the scope's node alone.
//
// The wake-up is sent for a duplicate too (the pipeline cannot know before
// it runs): a worker then wakes and finds nothing.
//
// It returns pgx.ErrNoRows when the identity exists, as ReceiptAccept does.
func acceptRouted(ctx context.Context, conn *pgxpool.Conn, d *draft, notify, withScope bool) (db.ReceiptAcceptRow, error) {
	return sendAcceptRouted(ctx, conn, conn, d, notify, withScope)
}

// acceptRoutedTx is AcceptTx's insert on Citus: acceptRouted's statements in
// the caller's transaction tx (which has the scope), without BEGIN and
// COMMIT. A duplicate leaves tx usable, as ReceiptAccept's does.
func acceptRoutedTx(ctx context.Context, tx pgx.Tx, d *draft) (db.ReceiptAcceptRow, error) {
	return sendAcceptRouted(ctx, tx, nil, d, true, false)
}

// sendAcceptRouted sends the routed accept on b: in a transaction of its
// own on conn, or in the caller's when conn is nil.
func sendAcceptRouted(ctx context.Context, b0 batcher, conn *pgxpool.Conn, d *draft, notify, withScope bool) (db.ReceiptAcceptRow, error) {
	own := conn != nil
	b := &pgx.Batch{}
	if own {
		b.Queue("BEGIN")
	}
	if withScope {
		// SET LOCAL, which reaches the scope's node (scope_citus.go).
		if err := queueScopeCitus(ctx, b, scopeParams(d.identity.Scope)); err != nil {
			return db.ReceiptAcceptRow{}, err
		}
	}
	q := db.New(batchQueue{b})
	p := d.acceptParams(false)
	_ = q.ReceiptInsertRouted(ctx, db.ReceiptInsertRoutedParams{
		ID: p.ID, ScopeKind: p.ScopeKind, ScopeID: p.ScopeID, Source: p.Source,
		Consumer: p.Consumer, MessageID: p.MessageID, EventType: p.EventType,
		SchemaVersion: p.SchemaVersion, Fingerprint: p.Fingerprint, Payload: p.Payload,
		Metadata: p.Metadata, MaxAttempts: p.MaxAttempts,
	})
	_ = q.ReceiptQueueRouted(ctx, db.ReceiptQueueRoutedParams{ScopeID: p.ScopeID, ID: p.ID})
	queueQuery(ctx, b, func(q *db.Queries) error {
		_, err := q.ReceiptQueuedRouted(ctx, db.ReceiptQueuedRoutedParams{ScopeID: p.ScopeID, ID: p.ID})
		return err
	})
	if notify {
		_ = q.ReceiptNotify(ctx, []string{p.Consumer})
	}
	if own {
		b.Queue("COMMIT")
	}

	ahead := 0 // the scope, with the BEGIN before it (sendScoped)
	if withScope {
		ahead = scopeStatementsCitus
		if own {
			ahead++
		}
	}
	br := sendScoped(ctx, b0, b, ahead)
	row, err := readAcceptRouted(br, withScope, notify, own)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if own && conn.Conn().PgConn().TxStatus() != 'I' {
			// A failed statement left the transaction open (aborted): end it
			// so the connection goes back to the pool clean.
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		return db.ReceiptAcceptRow{}, err
	}
	if row == nil {
		return db.ReceiptAcceptRow{}, pgx.ErrNoRows
	}
	return *row, nil
}

// readAcceptRouted reads acceptRouted's results in order: nil when no
// queue row was inserted (the identity exists).
func readAcceptRouted(br pgx.BatchResults, withScope, notify, own bool) (*db.ReceiptAcceptRow, error) {
	execs := 2 // the receipt, its queue row
	if own {
		execs++ // BEGIN
	}
	if withScope {
		execs += scopeStatementsCitus
	}
	for range execs {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	var row *db.ReceiptAcceptRow
	for rows.Next() {
		var r db.ReceiptAcceptRow
		if err := rows.Scan(&r.ID, &r.Status); err != nil {
			rows.Close()
			return nil, err
		}
		row = &r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if notify {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
		if row != nil {
			row.Notified = true
		}
	}
	if own {
		if _, err := br.Exec(); err != nil { // COMMIT
			return nil, err
		}
	}
	return row, nil
}

// errQueued ends a generated query function whose statement queryQueue
// queued instead of running.
var errQueued = errors.New("pginbox: internal: queued")

// queueQuery queues the one Query statement f runs, in b.
func queueQuery(ctx context.Context, b *pgx.Batch, f func(q *db.Queries) error) {
	if err := f(db.New(queryQueue{b})); !errors.Is(err, errQueued) {
		panic(fmt.Sprintf("pginbox: internal: queueQuery: %v", err))
	}
}

// queryQueue is a db.DBTX that queues a Query in a batch instead of running it.
type queryQueue struct{ b *pgx.Batch }

func (q queryQueue) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("pginbox: internal: queryQueue queues Query only")
}

func (q queryQueue) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	q.b.Queue(sql, args...)
	return nil, errQueued
}

func (q queryQueue) QueryRow(context.Context, string, ...any) pgx.Row {
	return errRow{errors.New("pginbox: internal: queryQueue queues Query only")}
}
