package inbox

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/internal/driver"
)

// The accept funnel: Accept, AcceptTx, AcceptBatch, AcceptBatchTx and group
// commit validate their messages into drafts and run them here as one plan
// through the layout's driver (internal/driver), which decides the
// statements. Here: repeats of an identity within the call resolve against
// its first occurrence, the drafts are grouped per scope in one global
// order, the workers are woken, and the receipts holding each identity
// become each message's outcome.

// acceptOwn accepts entries outside any caller's transaction, on the
// client's pool or, with Nodes, on the node of their first scope; op names
// the call in errors.
func (c *Client) acceptOwn(ctx context.Context, op string, entries []batchEntry, set func(int, BatchItem)) error {
	groups := planGroups(entries)
	pool, err := c.nodes.poolFor(ctx, c.pool, groups[0].Scope)
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pginbox: %s: acquiring a connection: %w", op, err)
	}
	defer conn.Release()
	drv, err := c.drv.Get(ctx, conn)
	if err != nil {
		return dbError(op, err)
	}
	scopes := make([]Scope, len(groups))
	for i, g := range groups {
		scopes[i] = g.Scope
	}
	run := func(scoped bool) (*driver.Accepted, error) {
		return drv.Accept(ctx, &driver.AcceptPlan{
			Conn: conn, Groups: groups, Scoped: scoped, OnNode: c.nodes != nil,
			Wake: func() bool { return c.wakeups.inline(scopes...) },
		})
	}
	wasScoped := c.scopeAccepts.Load()
	res, err := run(wasScoped)
	if err != nil && !wasScoped && isInsufficientPrivilege(err) {
		// Row-level security is on (WITH CHECK refuses the insert before any
		// conflict check, so nothing was written): apply the scope from now on.
		c.scopeAccepts.Store(true)
		res, err = run(true)
	}
	if err != nil {
		var commit *driver.CommitError
		if errors.As(err, &commit) && !certainlyNotCommitted(ctx, commit.Err) {
			return fmt.Errorf("%w: %w", ErrCommitUncertain, commit.Err)
		}
		return dbError(op, err)
	}
	if !res.Woken && len(res.Inserted) > 0 {
		c.wakeups.later(insertedConsumers(groups, res.Inserted), scopes)
	}
	return resolveAll(entries, res, set)
}

// acceptIn accepts entries in the caller's tx without switching it to
// another scope: a tx scoped already takes only messages of its scope (a
// *ScopeMismatchError otherwise, before anything is written); an unscoped
// tx gets the batch's scope, or, for several scopes, each group's in turn
// and none again at the end.
func (c *Client) acceptIn(ctx context.Context, tx pgx.Tx, op string, entries []batchEntry, set func(int, BatchItem)) error {
	drv, err := c.drv.Get(ctx, tx)
	if err != nil {
		return dbError(op, err)
	}
	groups := planGroups(entries)
	have, applied, err := drv.EnsureScope(ctx, tx, groups[0].Scope)
	if err != nil {
		return dbError(op+": reading the transaction's scope", err)
	}
	if !applied && (have != groups[0].Scope || len(groups) > 1) {
		want := groups[0].Scope
		if have == want {
			want = groups[1].Scope
		}
		return &ScopeMismatchError{Tx: have, Want: want}
	}
	res, err := drv.Accept(ctx, &driver.AcceptPlan{Tx: tx, Groups: groups})
	if err != nil {
		return dbError(op, err)
	}
	return resolveAll(entries, res, set)
}

// planGroups groups entries per scope, in scope order, each identity once
// (its first occurrence): plain drafts in identity order, which is one
// global insert order (two batches inserting overlapping identities wait on
// each other in the same order, so they cannot deadlock), keyed drafts in
// the call's order, which is their keys' order.
func planGroups(entries []batchEntry) []driver.AcceptGroup {
	seen := make(map[Identity]bool, len(entries))
	var plain, keyed []*draft
	for _, e := range entries {
		if seen[e.d.Identity] {
			continue
		}
		seen[e.d.Identity] = true
		if e.d.OrderingKey != "" {
			keyed = append(keyed, e.d)
		} else {
			plain = append(plain, e.d)
		}
	}
	slices.SortFunc(plain, func(a, b *draft) int { return compareIdentities(a.Identity, b.Identity) })
	var groups []driver.AcceptGroup
	group := func(s Scope) *driver.AcceptGroup {
		i, found := slices.BinarySearchFunc(groups, s, func(g driver.AcceptGroup, s Scope) int { return compareScopes(g.Scope, s) })
		if !found {
			groups = slices.Insert(groups, i, driver.AcceptGroup{Scope: s})
		}
		return &groups[i]
	}
	for _, d := range plain {
		g := group(d.Identity.Scope)
		g.Plain = append(g.Plain, d)
	}
	for _, d := range keyed {
		g := group(d.Identity.Scope)
		g.Keyed = append(g.Keyed, d)
	}
	return groups
}

func compareScopes(a, b Scope) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID))
}

func compareIdentities(a, b Identity) int {
	return cmp.Or(
		compareScopes(a.Scope, b.Scope),
		cmp.Compare(a.Source, b.Source),
		cmp.Compare(a.Consumer, b.Consumer),
		cmp.Compare(a.MessageID, b.MessageID),
	)
}

// insertedConsumers lists the consumers of the inserted drafts, each once.
func insertedConsumers(groups []driver.AcceptGroup, inserted []ID) []string {
	in := make(map[ID]bool, len(inserted))
	for _, id := range inserted {
		in[id] = true
	}
	var out []string
	for _, g := range groups {
		for _, ds := range [][]*draft{g.Plain, g.Keyed} {
			for _, d := range ds {
				if in[d.ID] && !slices.Contains(out, d.Identity.Consumer) {
					out = append(out, d.Identity.Consumer)
				}
			}
		}
	}
	return out
}

// holder is the receipt that owns an identity after the plan ran.
type holder struct {
	id          ID
	status      Status
	fingerprint []byte
	insertedBy  ID // the draft whose insert created it; zero if it existed
}

// resolveAll reports every entry through set: the entry whose draft was
// inserted is Accepted, the others Duplicate or Conflict by fingerprint.
func resolveAll(entries []batchEntry, res *driver.Accepted, set func(int, BatchItem)) error {
	holders := make(map[Identity]holder, len(entries))
	if len(res.Inserted) > 0 {
		byID := make(map[ID]*draft, len(entries))
		for _, e := range entries {
			byID[e.d.ID] = e.d
		}
		for _, id := range res.Inserted {
			d := byID[id]
			holders[d.Identity] = holder{id: id, status: StatusPending, fingerprint: d.Fingerprint[:], insertedBy: id}
		}
	}
	for _, h := range res.Existing {
		holders[h.Identity] = holder{id: h.ID, status: liveStatus(h.Status), fingerprint: h.Fingerprint}
	}
	for _, e := range entries {
		h, ok := holders[e.d.Identity]
		if !ok {
			// Only a receipt deleted between the insert and the read gets here.
			return fmt.Errorf("pginbox: accept: the receipt of %s vanished while accepting: retry", e.d.Identity)
		}
		set(e.pos, resolve(e.d, h))
	}
	return nil
}

// resolve turns the receipt holding an entry's identity into the entry's item.
func resolve(d *draft, h holder) BatchItem {
	switch {
	case h.insertedBy == d.ID:
		return BatchItem{Outcome: Accepted, ID: h.id, Status: StatusPending}
	case bytes.Equal(h.fingerprint, d.Fingerprint[:]):
		return BatchItem{Outcome: Duplicate, ID: h.id, Status: h.status}
	default:
		return BatchItem{Outcome: Conflict, ID: h.id, Status: h.status,
			Err: &ConflictError{Identity: d.Identity, ReceiptID: h.id}}
	}
}

// isInsufficientPrivilege reports SQLSTATE 42501, which row-level security
// raises for a row outside the transaction's scope.
func isInsufficientPrivilege(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}
