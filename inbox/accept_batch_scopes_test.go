package inbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
)

// statementLog records the first line of every statement a pool sends,
// alone or in a pipeline.
type statementLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	first, _, _ := strings.Cut(strings.TrimSpace(d.SQL), "\n")
	l.mu.Lock()
	l.lines = append(l.lines, first)
	l.mu.Unlock()
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The batch hooks: statements sent in a pipeline count too.
func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *statementLog) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.TraceQueryStart(ctx, c, pgx.TraceQueryStartData{SQL: d.SQL})
}

func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (l *statementLog) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// Without row-level security a batch of several tenants is one statement
// and its own commit, as a batch of one tenant is: no transaction and no
// scope setting per tenant (16 tenants used to cost 16 round trips).
func TestAcceptBatchOfSeveralScopesIsOneStatement(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	log := &statementLog{}
	pool, _ := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = log })
	c := newClient(t, pool, inbox.Config{})
	var msgs []inbox.Message
	for i, s := range []inbox.Scope{inbox.Tenant("a"), inbox.Tenant("b"), inbox.Global(), inbox.Tenant("c")} {
		msgs = append(msgs, tenantMsg(s, "one"), tenantMsg(s, "two"))
		if i == 0 {
			msgs = append(msgs, tenantMsg(s, "one")) // a repeat in the batch
		}
	}
	items, err := c.AcceptBatch(ctx, msgs)
	is.NoErr(err)
	for i, it := range items {
		is.NoErr(it.Err)
		if i == 2 {
			is.Equal(it.Outcome, inbox.Duplicate)
		} else {
			is.Equal(it.Outcome, inbox.Accepted)
		}
	}
	is.Equal(log.count("-- name: ReceiptAcceptBatch"), 1)
	is.Equal(log.count("-- name: ScopeApply"), 0)
	is.Equal(log.count("begin"), 0)
	is.Equal(countRows(t, pool, "true"), 8)
}

// Under row-level security the first batch of several tenants meets the
// policy, which refuses it before writing anything; it is then accepted
// one tenant at a time, each after its scope, and later batches start so.
func TestAcceptBatchOfSeveralScopesUnderRowSecurity(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	td := newTenancyDB(t)
	c := newClient(t, td.app, inbox.Config{})
	a, b := inbox.Tenant("a"), inbox.Tenant("b")
	for round, id := range []string{"one", "two"} {
		items, err := c.AcceptBatch(ctx, []inbox.Message{tenantMsg(b, id), tenantMsg(a, id), tenantMsg(inbox.Global(), id)})
		is.NoErr(err)
		for _, it := range items {
			is.NoErr(it.Err)
			is.Equal(it.Outcome, inbox.Accepted) // round
		}
		is.Equal(td.scopedCount(t, a, "pginbox_receipts"), round+1)
		is.Equal(td.scopedCount(t, b, "pginbox_receipts"), round+1)
	}
}
