package driver

import (
	"cmp"
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

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
	var dbtx db.DBTX = p.Conn
	if p.Scoped {
		dbtx = d.Scoped(p.Conn, g.Scope)
	}
	q := db.New(dbtx)
	notify := p.Wake()
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
		inserted, err := acceptBatchTx(ctx, tx, g.Scope, g.Plain)
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

// acceptBatchTx inserts drafts of scope s in the caller's transaction tx
// (which has the scope): pginbox_accept_batch and the wake-up, sent as one
// pipeline; the wake-up reaches the workers when tx commits, also when
// nothing was new (the pipeline cannot know before it runs).
func acceptBatchTx(ctx context.Context, tx pgx.Tx, s inboxtype.Scope, drafts []*Draft) ([]inboxtype.ID, error) {
	b := &pgx.Batch{}
	QueueQuery(ctx, b, func(q *db.Queries) error {
		_, err := q.ReceiptAcceptBatchRouted(ctx, batchRoutedParams(s, drafts, false))
		return err
	})
	_ = Queue(b).ReceiptNotify(ctx, consumersOf(drafts))
	br := tx.SendBatch(ctx, b)
	rows, err := br.Query()
	var inserted []inboxtype.ID
	if err == nil {
		inserted, err = pgx.CollectRows(rows, pgx.RowTo[inboxtype.ID])
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return inserted, err
}
