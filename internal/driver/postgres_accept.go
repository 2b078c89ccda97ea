package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
)

// Accept on one server: unkeyed drafts go in one statement that is also
// the commit (ReceiptAccept for one message, ReceiptAcceptBatch for more,
// across scopes when no scope must be applied); keyed drafts, and groups
// that each need their scope, in one transaction.
func (d postgres) Accept(ctx context.Context, p *AcceptPlan) (*Accepted, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if p.Tx != nil {
		return callerTxPlan(ctx, d, p, d.group(p))
	}
	if p.keyed() || (len(p.Groups) > 1 && p.Scoped) {
		return ownTxPlan(ctx, d, p, d.group(p))
	}
	var q *db.Queries
	if len(p.Groups) == 1 && p.Scoped {
		q = db.New(d.Scoped(p.Conn, p.Groups[0].Scope))
	} else {
		q = db.New(p.Conn) // no scope: one statement across scopes
	}
	notify := p.Wake()
	if one := p.one(); one != nil {
		return acceptOne(ctx, q, one, notify, true)
	}
	out := &Accepted{Woken: notify}
	return out, acceptMany(ctx, q, p.plainDrafts(), notify, true, out)
}

// group accepts one group in a transaction: the keyed drafts under their
// keys' locks, then the rest.
func (postgres) group(p *AcceptPlan) func(context.Context, pgx.Tx, *db.Queries, AcceptGroup, *Accepted) error {
	return func(ctx context.Context, tx pgx.Tx, q *db.Queries, g AcceptGroup, out *Accepted) error {
		if len(g.Keyed) > 0 {
			insert := func(bq *db.Queries, kp db.ReceiptInsertKeyedParams) int {
				_, _ = bq.ReceiptInsertKeyed(ctx, kp)
				return 1
			}
			if err := acceptKeyed(ctx, tx, q, g.Scope, g.Keyed, insert, out); err != nil {
				return err
			}
		}
		if len(g.Plain) == 0 {
			return nil
		}
		if one := p.one(); one != nil {
			res, err := acceptOne(ctx, q, one, true, false)
			if err == nil {
				out.Inserted, out.Existing = res.Inserted, res.Existing
			}
			return err
		}
		return acceptMany(ctx, q, g.Plain, true, false, out)
	}
}

// acceptOne inserts d with ReceiptAccept on q, which wakes the workers in
// the same statement when notify; own: the statement is its own commit.
func acceptOne(ctx context.Context, q *db.Queries, d *Draft, notify, own bool) (*Accepted, error) {
	row, err := q.ReceiptAccept(ctx, d.acceptParams(notify))
	if err == nil {
		return &Accepted{Inserted: []inboxtype.ID{row.ID}, Woken: notify}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		if own {
			return nil, commitError(err)
		}
		return nil, err
	}
	h, err := holderByIdentity(ctx, q, d)
	if err != nil {
		return nil, err
	}
	return &Accepted{Existing: []Holder{h}, Woken: notify}, nil
}

// acceptMany inserts drafts (in identity order) with ReceiptAcceptBatch on
// q and reads the receipts of those that existed (ReceiptsByIdentities);
// own: the insert is its own commit.
func acceptMany(ctx context.Context, q *db.Queries, drafts []*Draft, notify, own bool, out *Accepted) error {
	inserted, err := q.ReceiptAcceptBatch(ctx, batchParams(drafts, notify))
	if err != nil {
		if own {
			return commitError(err)
		}
		return err
	}
	out.Inserted = append(out.Inserted, inserted...)
	rest := missing(drafts, inserted)
	if len(rest) == 0 {
		return nil
	}
	// ON CONFLICT waited for any concurrent inserter to finish, so this new
	// statement sees their committed rows.
	var ex db.ReceiptsByIdentitiesParams
	for _, d := range rest {
		id := d.Identity
		ex.ScopeKinds = append(ex.ScopeKinds, string(id.Scope.Kind))
		ex.ScopeIds = append(ex.ScopeIds, id.Scope.ID)
		ex.Sources = append(ex.Sources, id.Source)
		ex.Consumers = append(ex.Consumers, id.Consumer)
		ex.MessageIds = append(ex.MessageIds, id.MessageID)
	}
	rows, err := q.ReceiptsByIdentities(ctx, ex)
	if err != nil {
		return fmt.Errorf("reading the existing receipts: %w", err)
	}
	for _, r := range rows {
		out.Existing = append(out.Existing, Holder{ID: r.ID, Status: r.Status, Fingerprint: r.Fingerprint,
			Identity: inboxtype.IdentityOf(r.ScopeKind, r.ScopeID, r.Source, r.Consumer, r.MessageID)})
	}
	return nil
}
