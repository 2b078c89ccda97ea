package inbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
)

// A transaction has one scope (ApplyScope), so a batch of several scopes is
// accepted one scope at a time, each group's statements after its scope.

type scopeGroup struct {
	scope   Scope
	entries []batchEntry
}

// groupByScope groups entries by scope, in scope order, which keeps the
// global insert order acceptBatch relies on against deadlocks.
func groupByScope(entries []batchEntry) []scopeGroup {
	sorted := slices.Clone(entries)
	slices.SortStableFunc(sorted, func(a, b batchEntry) int {
		sa, sb := a.d.identity.Scope, b.d.identity.Scope
		return cmp.Or(cmp.Compare(sa.Kind, sb.Kind), cmp.Compare(sa.ID, sb.ID))
	})
	var groups []scopeGroup
	for _, e := range sorted {
		if n := len(groups); n > 0 && groups[n-1].scope == e.d.identity.Scope {
			groups[n-1].entries = append(groups[n-1].entries, e)
			continue
		}
		groups = append(groups, scopeGroup{scope: e.d.identity.Scope, entries: []batchEntry{e}})
	}
	return groups
}

// acceptBatchOwn accepts entries on conn outside any caller's transaction.
// One scope: each statement is its own commit, with the scope in the same
// round trip. Several: one statement without a scope while row-level
// security has not refused one, else one transaction, each group after its
// own scope.
func (c *Client) acceptBatchOwn(ctx context.Context, conn *pgxpool.Conn, entries []batchEntry, set func(int, BatchItem)) error {
	distributed, err := c.layout.get(ctx, conn)
	if err != nil {
		return dbError("accept batch", err)
	}
	groups := groupByScope(entries)
	keyed := hasKeyed(entries)
	if len(groups) == 1 && !keyed {
		return c.acceptBatch(ctx, db.New(scoped(conn, groups[0].scope, distributed)), routedOn(distributed, conn), entries, true, set)
	}
	if !distributed && !c.scopeAccepts.Load() && !keyed {
		// Without row-level security the scopes need no setting: one
		// statement is the whole batch and its commit, as for one scope. A
		// policy refuses it before it writes anything (42501), as Accept
		// finds out: from then on each scope's part runs after its scope.
		err := c.acceptBatch(ctx, db.New(conn), nil, entries, true, set)
		if err == nil || !isInsufficientPrivilege(err) {
			return err
		}
		c.scopeAccepts.Store(true)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return dbError("accept batch: begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// Messages with an ordering key need the transaction: their keys' locks
	// are held until it commits.
	for _, g := range groups {
		if err := c.acceptGroup(ctx, tx, db.New(scoped(tx, g.scope, distributed)), routedOn(distributed, tx), g.scope, g.entries, set); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		if certainlyNotCommitted(ctx, err) {
			return dbError("accept batch: commit", err)
		}
		return fmt.Errorf("%w: %w", ErrCommitUncertain, err)
	}
	return nil
}

// acceptBatchCaller accepts entries in the caller's tx without switching it to
// another scope: a tx scoped already takes only messages of its scope (a
// *ScopeMismatchError otherwise, before anything is written); an unscoped tx
// gets the batch's scope, or, for several scopes, each group's in turn and
// none again at the end.
func (c *Client) acceptBatchCaller(ctx context.Context, tx pgx.Tx, entries []batchEntry, set func(int, BatchItem)) error {
	distributed, err := c.layout.get(ctx, tx)
	if err != nil {
		return dbError("accept batch", err)
	}
	groups := groupByScope(entries)
	applied, err := ensureScopeApplied(ctx, tx, groups[0].scope, distributed)
	if err != nil {
		return err
	}
	if !applied && len(groups) > 1 {
		return &ScopeMismatchError{Tx: groups[0].scope, Want: groups[1].scope}
	}
	routed := routedOn(distributed, tx)
	if len(groups) == 1 {
		return c.acceptGroup(ctx, tx, db.New(tx), routed, groups[0].scope, entries, set)
	}
	for i, g := range groups {
		var q *db.Queries
		if i == 0 {
			q = db.New(tx) // ensureScopeApplied set it
		} else {
			q = db.New(scoped(tx, g.scope, distributed))
		}
		if err := c.acceptGroup(ctx, tx, q, routed, g.scope, g.entries, set); err != nil {
			return err
		}
	}
	if err := applyScopeParams(ctx, tx, noScope, distributed); err != nil {
		return dbError("accept batch: clearing the scope", err)
	}
	return nil
}

// routedOn returns b when the tables are distributed (Citus), where a batch
// accept sends routed statements on it; nil on one server.
func routedOn(distributed bool, b batcher) batcher {
	if distributed {
		return b
	}
	return nil
}
