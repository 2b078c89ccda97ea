package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
)

// On Citus a batch of several scopes is split per scope, and each scope's
// part runs on its node: its inserts are routed statements sent to the
// scope's node, none is pulled through the coordinator. AcceptBatchTx and
// group commit (which sends batches) too.
func TestCitusAcceptBatchRoutesPerScope(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, rc := citusPool(t)
	c := newClient(t, pool, inbox.Config{})
	tenants := []string{"tenant-r1", "tenant-r2", "tenant-r3"}
	msg := func(tenant, id string, n int) inbox.Message {
		m := orderMsg(id, map[string]int{"n": n})
		m.Scope = inbox.Tenant(tenant)
		return m
	}
	// An existing receipt, for a duplicate and a conflict in the batch.
	old, err := c.Accept(ctx, msg("tenant-r2", "old", 1))
	is.NoErr(err)

	rc.Reset()
	var msgs []inbox.Message
	for _, tenant := range tenants {
		msgs = append(msgs, msg(tenant, "a", 1), msg(tenant, "b", 2), msg(tenant, "a", 1))
	}
	msgs = append(msgs, msg("tenant-r2", "old", 1), msg("tenant-r2", "old", 2), msg("tenant-r3", "", 0))
	items, err := c.AcceptBatch(ctx, msgs)
	is.NoErr(err)
	for i := range tenants {
		is.Equal(items[3*i].Outcome, inbox.Accepted)
		is.Equal(items[3*i+1].Outcome, inbox.Accepted)
		is.Equal(items[3*i+2].Outcome, inbox.Duplicate) // of the first, in the batch
		is.Equal(items[3*i+2].ID, items[3*i].ID)
	}
	is.Equal(items[9].Outcome, inbox.Duplicate)
	is.Equal(items[9].ID, old.ID)
	is.Equal(items[10].Outcome, inbox.Conflict)
	is.True(errors.Is(items[10].Err, inbox.ErrIdentityConflict))
	is.Equal(items[11].Outcome, inbox.Invalid)

	// Each tenant's inserts went to its node; nothing was pulled through
	// the coordinator.
	is.Equal(len(rc.Matching("read_intermediate_result")), 0)
	for _, tenant := range tenants {
		port := fmt.Sprintf("127.0.0.1:%d ", nodeOf(t, pool, "pginbox_receipts", tenant))
		inserts := 0
		for _, l := range rc.Matching("'" + tenant + "'") {
			if strings.Contains(l, "INSERT INTO public.pginbox_") {
				inserts++
				if !strings.Contains(l, port) {
					t.Errorf("%s's insert went to another node than its shard's (%s): %s", tenant, port, l)
				}
			}
		}
		is.True(inserts > 0) // the log captured them
	}
	is.Equal(countRows(t, pool, "true"), 7)
	var queued int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_work").Scan(&queued))
	is.Equal(queued, 7) // every new receipt has its queue row

	// In the caller's transaction: nothing until it commits.
	tx, err := pool.Begin(ctx)
	is.NoErr(err)
	items, err = c.AcceptBatchTx(ctx, tx, []inbox.Message{msg("tenant-r1", "tx", 1), msg("tenant-r1", "a", 1)})
	is.NoErr(err)
	is.Equal(items[0].Outcome, inbox.Accepted)
	is.Equal(items[1].Outcome, inbox.Duplicate)
	is.Equal(countRows(t, pool, "true"), 7)
	is.NoErr(tx.Commit(ctx))
	is.Equal(countRows(t, pool, "true"), 8)

	// Group commit sends concurrent accepts as batches.
	gc := newClient(t, pool, inbox.Config{GroupCommit: true})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tenant := tenants[i%len(tenants)]
			res, err := gc.Accept(ctx, msg(tenant, fmt.Sprint("g-", i/2), i/2))
			if err == nil && res.Outcome != inbox.Accepted && res.Outcome != inbox.Duplicate {
				err = fmt.Errorf("%d: %s", i, res.Outcome)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		is.NoErr(err)
	}
	// i and i+1 are in different tenants, so no duplicates: 40 new receipts.
	is.Equal(countRows(t, pool, "true"), 48)
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_work").Scan(&queued))
	is.Equal(queued, 48)
}

// On Citus AcceptTx sends routed statements to the scope's node in the
// caller's transaction, and commits or rolls back with it.
func TestCitusAcceptTxRoutes(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, rc := citusPool(t)
	c := newClient(t, pool, inbox.Config{})
	msg := orderMsg("tx-1", map[string]int{"n": 1})
	msg.Scope = inbox.Tenant("tenant-tx")

	rc.Reset()
	tx, err := pool.Begin(ctx)
	is.NoErr(err)
	res, err := c.AcceptTx(ctx, tx, msg)
	is.NoErr(err)
	is.Equal(res.Outcome, inbox.Accepted)
	again, err := c.AcceptTx(ctx, tx, msg)
	is.NoErr(err) // a duplicate leaves the transaction usable
	is.Equal(again.Outcome, inbox.Duplicate)
	is.Equal(again.ID, res.ID)
	changed := msg
	changed.Payload = map[string]int{"n": 2}
	_, err = c.AcceptTx(ctx, tx, changed)
	is.True(errors.Is(err, inbox.ErrIdentityConflict))
	is.NoErr(tx.Commit(ctx))
	is.Equal(countRows(t, pool, "id = $1", res.ID), 1)
	var queued int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pginbox_work WHERE receipt_id = $1", res.ID).Scan(&queued))
	is.Equal(queued, 1)

	is.Equal(len(rc.Matching("read_intermediate_result")), 0) // nothing pulled through the coordinator
	port := fmt.Sprintf("127.0.0.1:%d ", nodeOf(t, pool, "pginbox_receipts", "tenant-tx"))
	inserts := rc.Matching("INSERT INTO public.pginbox_")
	is.True(len(inserts) > 0)
	for _, l := range inserts {
		if !strings.Contains(l, port) {
			t.Errorf("an insert went to another node than the scope's (%s): %s", port, l)
		}
	}

	// A rollback leaves nothing.
	msg.MessageID = "tx-2"
	tx, err = pool.Begin(ctx)
	is.NoErr(err)
	_, err = c.AcceptTx(ctx, tx, msg)
	is.NoErr(err)
	is.NoErr(tx.Rollback(ctx))
	is.Equal(countRows(t, pool, "message_id = 'tx-2'"), 0)
}

// On Citus, 100 concurrent copies of one message (Accept, with and without
// group commit) store one receipt: one Accepted, the others Duplicate of it.
func TestCitusAcceptDedupUnderConcurrency(t *testing.T) {
	t.Parallel()
	pool, _ := citusPool(t)
	for _, groupCommit := range []bool{false, true} {
		t.Run(fmt.Sprint("group commit ", groupCommit), func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			c := newClient(t, pool, inbox.Config{GroupCommit: groupCommit})
			msg := orderMsg(fmt.Sprint("copy-", groupCommit), map[string]int{"n": 1})
			msg.Scope = inbox.Tenant("tenant-dedup")
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				outcomes = map[inbox.Outcome]int{}
				ids      = map[inbox.ID]bool{}
				errs     []error
			)
			for range 100 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := c.Accept(ctx, msg)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs = append(errs, err)
						return
					}
					outcomes[res.Outcome]++
					ids[res.ID] = true
				}()
			}
			wg.Wait()
			is.Equal(errs, nil)
			is.Equal(outcomes[inbox.Accepted], 1)
			is.Equal(outcomes[inbox.Duplicate], 99)
			is.Equal(len(ids), 1)
			is.Equal(countRows(t, pool, "message_id = $1", msg.MessageID), 1)
		})
	}
}
