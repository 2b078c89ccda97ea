package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/schema"
)

// Accept, its duplicate path, AcceptBatch with mixed tenants and group commit
// all work under the application role with row-level security on.
func TestAcceptUnderAppRole(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	td := newTenancyDB(t)
	c := newClient(t, td.app, inbox.Config{})
	a, b, g := inbox.Tenant("a"), inbox.Tenant("b"), inbox.Global()

	res, err := c.Accept(ctx, tenantMsg(a, "one"))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)
	dup, err := c.Accept(ctx, tenantMsg(a, "one"))
	is.NoErr(err)
	is.Equal(dup.Outcome, inbox.Duplicate) // the lookup of the existing receipt ran in a's scope
	is.Equal(dup.ID, res.ID)
	res, err = c.Accept(ctx, tenantMsg(g, "one"))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted) // the same message ID in another scope is another message

	// Mixed tenants in one batch, with a duplicate and an in-batch repeat.
	items, err := c.AcceptBatch(ctx, []inbox.Message{
		tenantMsg(b, "two"), tenantMsg(a, "two"), tenantMsg(a, "one"), tenantMsg(g, "two"), tenantMsg(b, "two"), tenantMsg(b, "three"),
	})
	is.NoErr(err)
	want := []inbox.Outcome{inbox.Accepted, inbox.Accepted, inbox.Duplicate, inbox.Accepted, inbox.Duplicate, inbox.Accepted}
	for i, it := range items {
		is.NoErr(it.Err)
		is.Equal(it.Outcome, want[i]) // item i
	}
	is.Equal(td.scopedCount(t, a, "pginbox_receipts"), 2)
	is.Equal(td.scopedCount(t, b, "pginbox_receipts"), 2)
	is.Equal(td.scopedCount(t, g, "pginbox_receipts"), 2)
	is.Equal(td.scopedCount(t, b, "pginbox_work"), 2)

	// Group commit: concurrent calls of several tenants share batches.
	gc := newClient(t, td.app, inbox.Config{GroupCommit: true, GroupCommitMaxBatch: 16})
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := []inbox.Scope{a, b, g}[i%3]
			if _, err := gc.Accept(ctx, tenantMsg(s, fmt.Sprintf("gc-%d", i))); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	is.Equal(td.allCount(t, "pginbox_receipts_live", "message_id LIKE 'gc-%' AND scope_kind = 'tenant' AND scope_id = 'a'"), 20)
	is.Equal(td.allCount(t, "pginbox_receipts_live", "message_id LIKE 'gc-%' AND scope_kind = 'global'"), 20)
}

// AcceptTx never moves the caller's transaction to another scope: an
// unscoped transaction takes the message's scope, a transaction of the same
// scope is fine, one of another scope gets a typed error and nothing is
// written, and the transaction stays usable.
func TestAcceptTxKeepsTheCallersScope(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	td := newTenancyDB(t)
	c := newClient(t, td.app, inbox.Config{})
	a, b := inbox.Tenant("a"), inbox.Tenant("b")

	err := pgx.BeginFunc(ctx, td.app, func(tx pgx.Tx) error {
		if _, err := c.AcceptTx(ctx, tx, tenantMsg(a, "one")); err != nil { // applies a
			return err
		}
		if _, err := c.AcceptTx(ctx, tx, tenantMsg(a, "two")); err != nil { // a again: fine
			return err
		}
		_, err := c.AcceptTx(ctx, tx, tenantMsg(b, "three"))
		var mm *inbox.ScopeMismatchError
		is.True(errors.As(err, &mm))
		is.True(errors.Is(err, inbox.ErrScopeMismatch))
		is.Equal(mm.Tx, a)
		is.Equal(mm.Want, b)
		_, err = c.AcceptBatchTx(ctx, tx, []inbox.Message{tenantMsg(a, "four"), tenantMsg(b, "four")})
		is.True(errors.Is(err, inbox.ErrScopeMismatch))
		var tenant string
		if err := tx.QueryRow(ctx, "SELECT current_setting('pginbox.tenant', true)").Scan(&tenant); err != nil {
			return err // the refusals left the transaction usable
		}
		is.Equal(tenant, "a")
		return nil
	})
	is.NoErr(err)
	is.Equal(td.scopedCount(t, a, "pginbox_receipts"), 2)
	is.Equal(td.scopedCount(t, b, "pginbox_receipts"), 0)

	// An unscoped transaction takes a mixed batch, group by group, and ends
	// with no scope, as it started.
	err = pgx.BeginFunc(ctx, td.app, func(tx pgx.Tx) error {
		items, err := c.AcceptBatchTx(ctx, tx, []inbox.Message{tenantMsg(b, "five"), tenantMsg(a, "five"), tenantMsg(inbox.Global(), "five")})
		if err != nil {
			return err
		}
		for _, it := range items {
			is.Equal(it.Outcome, inbox.Accepted)
		}
		var tenant, global string
		if err := tx.QueryRow(ctx, "SELECT current_setting('pginbox.tenant', true), current_setting('pginbox.global', true)").Scan(&tenant, &global); err != nil {
			return err
		}
		is.Equal(tenant, "")
		is.Equal(global, "")
		return nil
	})
	is.NoErr(err)
	is.Equal(td.scopedCount(t, a, "pginbox_receipts"), 3)
	is.Equal(td.scopedCount(t, b, "pginbox_receipts"), 1)
	is.Equal(td.scopedCount(t, inbox.Global(), "pginbox_receipts"), 1)
}

// A client that started before tenancy was enabled keeps accepting after it:
// the first refused unscoped Accept (fresh or a redelivery) switches it to
// applying the scope, and nothing is written twice or lost.
func TestAcceptLearnsTenancyWasEnabled(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	td := newTenancyDB(t)
	is.NoErr(schema.DisableTenancy(ctx, td.owner))
	a, b := inbox.Tenant("a"), inbox.Tenant("b")

	before := newClient(t, td.app, inbox.Config{})
	res, err := before.Accept(ctx, tenantMsg(a, "m-1"))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)

	is.NoErr(schema.EnableTenancy(ctx, td.owner))
	// The first call after enabling is a redelivery.
	res, err = before.Accept(ctx, tenantMsg(a, "m-1"))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Duplicate)

	fresh := newClient(t, td.app, inbox.Config{})
	res, err = fresh.Accept(ctx, tenantMsg(b, "m-2"))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)
	res, err = fresh.Accept(ctx, tenantMsg(b, "m-2"))
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Duplicate)

	// Concurrent callers that all started unscoped each retry with the scope,
	// whichever of them switched the client first.
	racing := newClient(t, td.app, inbox.Config{})
	var conns []*pgxpool.Conn // open 16 connections first, so the calls overlap
	for range 16 {
		conn, err := td.app.Acquire(ctx)
		is.NoErr(err)
		conns = append(conns, conn)
	}
	for _, conn := range conns {
		conn.Release()
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			<-start
			_, err := racing.Accept(ctx, tenantMsg(a, fmt.Sprintf("race-%d", i)))
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		is.NoErr(err)
	}

	is.Equal(td.scopedCount(t, a, "pginbox_receipts"), 17)
	is.Equal(td.scopedCount(t, b, "pginbox_receipts"), 1)
	is.Equal(td.allCount(t, "pginbox_receipts", "true"), 18)
}
