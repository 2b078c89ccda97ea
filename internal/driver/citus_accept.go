package driver

import (
	"cmp"
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
)

// Accept on Citus. ReceiptAccept's and ReceiptAcceptBatch's CTEs would be
// pulled through the coordinator, which opens a connection to every worker
// node, so one node down would stop every tenant's accepts. Instead:
//
//   - one message outside a transaction calls pginbox_accept
//     (ReceiptAcceptRouted), which Citus hands whole to the scope's node:
//     one statement on the coordinator, both inserts and a one-phase commit
//     on that node. With the scope for row-level security it runs in a
//     transaction of its own, where Citus routes each insert instead. The
//     wake-up (ReceiptNotify, on the coordinator) follows the commit in a
//     round trip of its own; if it fails the receipt is accepted all the
//     same and the workers find it when they next poll;
//   - a batch of one scope is one pipeline in a transaction of its own
//     (acceptBatchRouted);
//   - several scopes, or ordering keys, run in one transaction, each group
//     after its scope; keyed inserts are INSERT ... VALUES
//     (ReceiptInsertKeyedRouted, ReceiptSeqKeyedRouted), since Citus would
//     pull an INSERT ... SELECT whose scope is a parameter through the
//     coordinator.
func (d citus) Accept(ctx context.Context, p *AcceptPlan) (*Accepted, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if p.Tx != nil {
		return callerTxPlan(ctx, d, p, d.group(p))
	}
	if p.keyed() || len(p.Groups) > 1 {
		return ownTxPlan(ctx, d, p, d.group(p))
	}
	g := p.Groups[0]
	if one := p.one(); one != nil {
		var dbtx db.DBTX = p.Conn
		if p.Scoped {
			dbtx = d.Scoped(p.Conn, g.Scope)
		}
		q := db.New(dbtx)
		row, err := q.ReceiptAcceptRouted(ctx, routedParams(one))
		if err == nil {
			out := &Accepted{Inserted: []inboxtype.ID{row.ID}}
			if p.Wake() {
				out.Woken = db.New(p.Conn).ReceiptNotify(ctx, []string{one.Identity.Consumer}) == nil
			}
			return out, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, commitError(err)
		}
		h, err := holderByIdentity(ctx, q, one)
		if err != nil {
			return nil, err
		}
		return &Accepted{Existing: []Holder{h}}, nil
	}
	notify := p.Wake()
	if p.Scoped {
		// Row-level security: the scope must reach the node, which takes
		// a transaction (SET LOCAL), where Citus would pull the function's
		// INSERT ... SELECT through the session's node: a routed insert
		// per message instead.
		inserted, err := acceptBatchRouted(ctx, p.Conn, g.Scope, g.Plain, notify, true)
		if err != nil {
			return nil, commitError(err)
		}
		out := &Accepted{Inserted: inserted, Woken: notify}
		holders, err := holdersOfScope(ctx, db.New(d.Scoped(p.Conn, g.Scope)), g.Scope, missing(g.Plain, inserted))
		out.Existing = holders
		return out, err
	}
	q := db.New(p.Conn)
	inserted, err := q.ReceiptAcceptBatchRouted(ctx, batchRoutedParams(g.Scope, g.Plain, notify && p.OnNode))
	if err != nil {
		return nil, commitError(err)
	}
	out := &Accepted{Inserted: inserted, Woken: notify && p.OnNode}
	if notify && !p.OnNode && len(inserted) > 0 {
		// The call ran on the scope's node; the workers listen here.
		out.Woken = db.New(p.Conn).ReceiptNotify(ctx, consumersOf(g.Plain)) == nil
	}
	holders, err := holdersOfScope(ctx, q, g.Scope, missing(g.Plain, inserted))
	out.Existing = holders
	return out, err
}

// group accepts one group in a transaction, every statement routed to the
// scope's node.
func (citus) group(p *AcceptPlan) func(context.Context, pgx.Tx, *db.Queries, AcceptGroup, *Accepted) error {
	return func(ctx context.Context, tx pgx.Tx, q *db.Queries, g AcceptGroup, out *Accepted) error {
		if len(g.Keyed) > 0 {
			insert := func(bq *db.Queries, kp db.ReceiptInsertKeyedParams) int {
				_ = bq.ReceiptInsertKeyedRouted(ctx, db.ReceiptInsertKeyedRoutedParams(kp))
				_ = bq.ReceiptSeqKeyedRouted(ctx, db.ReceiptSeqKeyedRoutedParams{ScopeID: kp.ScopeID, ID: kp.ID})
				return 2 // the insert, its number
			}
			if err := acceptKeyed(ctx, tx, q, g.Scope, g.Keyed, insert, out); err != nil {
				return err
			}
		}
		if len(g.Plain) == 0 {
			return nil
		}
		if one := p.one(); one != nil {
			id, err := acceptRoutedTx(ctx, tx, one)
			if err == nil {
				out.Inserted = append(out.Inserted, id)
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			h, err := holderByIdentity(ctx, q, one)
			out.Existing = append(out.Existing, h)
			return err
		}
		inserted, err := acceptBatchRouted(ctx, tx, g.Scope, g.Plain, true, false)
		if err != nil {
			return err
		}
		out.Inserted = append(out.Inserted, inserted...)
		holders, err := holdersOfScope(ctx, q, g.Scope, missing(g.Plain, inserted))
		out.Existing = append(out.Existing, holders...)
		return err
	}
}

// routedParams are ReceiptAcceptRouted's arguments for d.
func routedParams(d *Draft) db.ReceiptAcceptRoutedParams {
	p := d.acceptParams(false)
	return db.ReceiptAcceptRoutedParams{
		ID: p.ID, ScopeKind: p.ScopeKind, ScopeID: p.ScopeID, Source: p.Source,
		Consumer: p.Consumer, MessageID: p.MessageID, EventType: p.EventType,
		SchemaVersion: p.SchemaVersion, Fingerprint: p.Fingerprint, Payload: d.Payload,
		Metadata: p.Metadata, MaxAttempts: p.MaxAttempts,
	}
}

// acceptRoutedTx is AcceptTx's insert on Citus: ReceiptAcceptRouted and the
// wake-up in the caller's transaction tx (which has the scope), sent as one
// pipeline; the wake-up reaches the workers when tx commits. A duplicate
// (pgx.ErrNoRows) leaves tx usable.
func acceptRoutedTx(ctx context.Context, tx pgx.Tx, d *Draft) (inboxtype.ID, error) {
	b := &pgx.Batch{}
	QueueQuery(ctx, b, func(q *db.Queries) error {
		_, err := q.ReceiptAcceptRouted(ctx, routedParams(d))
		return err
	})
	_ = Queue(b).ReceiptNotify(ctx, []string{d.Identity.Consumer})
	br := tx.SendBatch(ctx, b)
	var row db.ReceiptAcceptRoutedRow
	err := br.QueryRow().Scan(&row.ID, &row.Status)
	_, nerr := br.Exec()
	if err == nil || errors.Is(err, pgx.ErrNoRows) {
		err = cmp.Or(nerr, err) // a failed insert fails the wake-up too: keep the first error
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return row.ID, err
}

// batchRoutedParams are ReceiptAcceptBatchRouted's arguments for drafts of
// scope s.
func batchRoutedParams(s inboxtype.Scope, drafts []*Draft, notify bool) db.ReceiptAcceptBatchRoutedParams {
	a := batchParams(drafts, false)
	return db.ReceiptAcceptBatchRoutedParams{
		ScopeKind: string(s.Kind), ScopeID: s.ID, Ids: a.Ids, Sources: a.Sources, Consumers: a.Consumers,
		MessageIds: a.MessageIds, EventTypes: a.EventTypes, SchemaVersions: a.SchemaVersions,
		Fingerprints: a.Fingerprints, Payloads: a.Payloads, Metadatas: a.Metadatas,
		MaxAttempts: a.MaxAttempts, Notify: notify,
	}
}

// acceptBatchRouted inserts drafts of scope s: each distinct identity a
// ReceiptInsertRouted (INSERT ... VALUES with the scope, on the scope's
// node), then one ReceiptQueueBatchRouted adds the queue rows of those
// inserted and ReceiptNotify wakes the workers (on the coordinator) when
// notify, all sent as one pipeline: one round trip. autocommit wraps it in a
// transaction of its own (one commit, on the scope's node); otherwise it
// runs in the caller's. It returns the IDs inserted, read from the inserts'
// row counts.
func acceptBatchRouted(ctx context.Context, b Batcher, s inboxtype.Scope, drafts []*Draft, notify, autocommit bool) ([]inboxtype.ID, error) {
	batch := &pgx.Batch{}
	if autocommit {
		batch.Queue("BEGIN")
	}
	// SET LOCAL, which reaches the scope's node.
	if err := queueCitusScope(ctx, batch, ScopeParams(s)); err != nil {
		return nil, err
	}
	q := Queue(batch)
	ids := make([]string, len(drafts))
	for i, d := range drafts {
		p := d.acceptParams(false)
		_ = q.ReceiptInsertRouted(ctx, db.ReceiptInsertRoutedParams{
			ID: p.ID, ScopeKind: p.ScopeKind, ScopeID: p.ScopeID, Source: p.Source,
			Consumer: p.Consumer, MessageID: p.MessageID, EventType: p.EventType,
			SchemaVersion: p.SchemaVersion, Fingerprint: p.Fingerprint, Payload: p.Payload,
			Metadata: p.Metadata, MaxAttempts: p.MaxAttempts,
		})
		ids[i] = d.ID.UUIDString()
	}
	_ = q.ReceiptQueueBatchRouted(ctx, db.ReceiptQueueBatchRoutedParams{ScopeID: s.ID, Ids: ids})
	if notify {
		_ = q.ReceiptNotify(ctx, consumersOf(drafts))
	}
	if autocommit {
		batch.Queue("COMMIT")
	}
	ahead := citusScopeStatements // the scope, with the BEGIN before it (sendScoped)
	if autocommit {
		ahead++
	}
	br := sendScoped(ctx, b, batch, ahead)
	var inserted []inboxtype.ID
	err := readExecs(br, ahead)
	for _, d := range drafts {
		if err != nil {
			break
		}
		var n int64
		n, err = execRows(br)
		if n == 1 {
			inserted = append(inserted, d.ID)
		}
	}
	if err == nil {
		tail := 1 // the queue rows
		if notify {
			tail++
		}
		if autocommit {
			tail++ // COMMIT
		}
		err = readExecs(br, tail)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if c, ok := b.(*pgxpool.Conn); ok && autocommit {
			rollbackAborted(ctx, c)
		}
		return nil, err
	}
	return inserted, nil
}

// execRows reads one Exec result and its row count.
func execRows(br pgx.BatchResults) (int64, error) {
	tag, err := br.Exec()
	return tag.RowsAffected(), err
}
