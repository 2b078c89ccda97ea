package drivertest

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/driver"
	"github.com/pginbox/pginbox/schema"
)

// The scope under row-level security (schema.EnableTenancy): Scoped,
// Opening, OpenTx, SetScope and EnsureScope show a restricted role its
// scope's rows alone, and its writes into another scope are refused.
var scopeCases = []testCase{
	{"Reads", scopeReads},
	{"Writes", scopeWrites},
	{"Handler", scopeHandler},
}

// tenancy is a database with row-level security on, and pools of an
// application role (restricted to its transaction's scope) and a system
// role (BYPASSRLS), as docs/TENANCY.md sets them up.
type tenancy struct {
	app, sys *pgxpool.Pool
}

// enableTenancy creates the roles (dropped when the case ends), grants them
// pginbox's tables and enables row-level security.
func (e *env) enableTenancy() tenancy {
	e.Helper()
	suffix := strings.ToLower(inboxtype.New().String())
	role := func(name string, system bool) string {
		name += suffix
		e.exec("CREATE ROLE " + name + " LOGIN")
		e.Cleanup(func() { // after the role's pools closed: cleanups run last-in first-out
			_, _ = e.pool.Exec(context.Background(), "DROP OWNED BY "+name)
			_, _ = e.pool.Exec(context.Background(), "DROP ROLE "+name)
		})
		stmts, err := schema.GrantStatements(name, system)
		e.must(err, "GrantStatements")
		for _, s := range stmts {
			e.exec(s)
		}
		return name
	}
	app, sys := role("drivertest_app_", false), role("drivertest_sys_", true)
	e.must(schema.EnableTenancy(e.ctx, e.pool), "EnableTenancy")
	return tenancy{app: e.newPool(e.dsn, app), sys: e.newPool(e.dsn, sys)}
}

// seeded accepts two receipts in tenant-a, one in tenant-b and one in the
// global scope, and returns them.
func (e *env) seeded() (a1, a2, b1, g1 *driver.Draft) {
	e.Helper()
	a1, a2, b1, g1 = draft(tenantA, consumer, "a1"), draft(tenantA, consumer, "a2"), draft(tenantB, consumer, "b1"), draft(global, consumer, "g1")
	e.accept(a1, a2, b1, g1)
	return a1, a2, b1, g1
}

// visible counts the rows of table that q shows.
func (e *env) visible(q db.DBTX, table string) int {
	e.Helper()
	var n int
	e.must(q.QueryRow(e.ctx, "SELECT count(*) FROM "+table).Scan(&n), "counting "+table)
	return n
}

// Reads in a scope see that scope's rows alone, on every path that applies
// one; with none, nothing.
func scopeReads(e *env) {
	e.seeded()
	t := e.enableTenancy()
	for _, c := range []struct {
		s    inboxtype.Scope
		want int
	}{{tenantA, 2}, {tenantB, 1}, {global, 1}, {tenantC, 0}} {
		for _, table := range []string{"pginbox_receipts", "pginbox_work"} {
			if n := e.visible(e.drv.Scoped(t.app, c.s), table); n != c.want {
				e.Fatalf("Scoped(%v) on the pool shows %d rows of %s, want %d", c.s, n, table, c.want)
			}
		}
		conn, done := e.conn(t.app)
		if n := e.visible(e.drv.Scoped(conn, c.s), "pginbox_receipts"); n != c.want {
			e.Fatalf("Scoped(%v) on a connection shows %d receipts, want %d", c.s, n, c.want)
		}
		done()
	}
	if n := e.visible(t.app, "pginbox_receipts"); n != 0 {
		e.Fatalf("the application role without a scope sees %d receipts", n)
	}
	if n := e.visible(t.sys, "pginbox_receipts"); n != 4 {
		e.Fatalf("the system role sees %d receipts, want 4", n)
	}

	// In a transaction: each scope replaces the one before; none shows nothing.
	tx := e.begin(t.app)
	steps := []struct {
		set  func()
		want int
	}{
		{func() { e.must(e.drv.SetScope(e.ctx, tx, driver.ScopeParams(tenantA)), "SetScope") }, 2},
		{func() { e.must(e.drv.SetScope(e.ctx, tx, driver.ScopeParams(global)), "SetScope") }, 1},
		{func() { e.must(e.drv.SetScope(e.ctx, tx, driver.ScopeParams(tenantB)), "SetScope") }, 1},
		{func() { e.must(e.drv.SetScope(e.ctx, tx, driver.NoScope), "SetScope") }, 0},
		{func() {
			if _, applied, err := e.drv.EnsureScope(e.ctx, tx, tenantA); err != nil || !applied {
				e.Fatalf("EnsureScope on a transaction without a scope: applied %v, %v", applied, err)
			}
		}, 2},
		{func() {
			if have, applied, err := e.drv.EnsureScope(e.ctx, tx, tenantB); err != nil || applied || have != tenantA {
				e.Fatalf("EnsureScope on a transaction of tenant-a: %v, %v, %v", have, applied, err)
			}
		}, 2},
	}
	for i, st := range steps {
		st.set()
		if n := e.visible(tx, "pginbox_receipts"); n != st.want {
			e.Fatalf("step %d: the transaction sees %d receipts, want %d", i, n, st.want)
		}
		if n := e.visible(tx, "pginbox_work"); n != st.want {
			e.Fatalf("step %d: the transaction sees %d work rows, want %d", i, n, st.want)
		}
	}
	e.must(tx.Rollback(e.ctx), "rollback")

	// Scoped inside a transaction scopes it.
	tx = e.begin(t.app)
	if n := e.visible(e.drv.Scoped(tx, tenantA), "pginbox_receipts"); n != 2 {
		e.Fatalf("Scoped(tenant-a) in a transaction shows %d receipts", n)
	}
	e.must(tx.Rollback(e.ctx), "rollback")

	// A claimer on the system role claims every scope; on the application
	// role, nothing (its restriction is what Worker.Start refuses).
	conn, done := e.conn(t.app)
	rows, _, err := e.claimer(lease).Claim(e.ctx, conn, 16, 16)
	done()
	e.must(err, "claim as the application role")
	if len(rows) != 0 {
		e.Fatalf("a claim as the restricted application role claimed %d receipts", len(rows))
	}
	conn, done = e.conn(t.sys)
	rows, _, err = e.claimer(lease).Claim(e.ctx, conn, 16, 16)
	done()
	e.must(err, "claim as the system role")
	if len(rows) != 4 {
		e.Fatalf("a claim as the system role claimed %d receipts, want 4", len(rows))
	}
}

// Writes: the application role's accept without a scope is refused with
// 42501 before anything is written (the Client then applies the scope and
// retries), unless the plan applies its scopes anyway; with the scope it
// goes through, in every plan shape; a transaction of one scope cannot
// write into another.
func scopeWrites(e *env) {
	t := e.enableTenancy()
	shapes := []struct {
		name   string
		drafts func(c string) []*driver.Draft
	}{
		{"one", func(c string) []*driver.Draft { return []*driver.Draft{draft(tenantA, c, "1")} }},
		{"batch", func(c string) []*driver.Draft { return []*driver.Draft{draft(tenantA, c, "1"), draft(tenantA, c, "2")} }},
		{"keyed", func(c string) []*driver.Draft {
			return []*driver.Draft{keyed(draft(tenantA, c, "1"), "k"), keyed(draft(tenantA, c, "2"), "k")}
		}},
		{"scopes", func(c string) []*driver.Draft {
			return []*driver.Draft{draft(tenantA, c, "1"), draft(tenantB, c, "2"), draft(global, c, "3")}
		}},
		{"global", func(c string) []*driver.Draft { return []*driver.Draft{draft(global, c, "1")} }},
	}
	for _, sh := range shapes {
		name, shape := sh.name, sh.drafts
		c := "c." + name
		drafts := shape(c)
		res, err := e.acceptOn(t.app, ownWay, plan(drafts...), func() bool { return true })
		stored := e.count("SELECT count(*) FROM pginbox_receipts WHERE consumer = $1", c)
		switch {
		case err == nil:
			// A plan in a transaction of its own applies each group's
			// scope whether or not it was asked to.
			if len(res.Inserted) != len(drafts) || stored != len(drafts) {
				e.Fatalf("%s: an unscoped accept as the restricted role inserted %d of %d (%d stored)", name, len(res.Inserted), len(drafts), stored)
			}
		case sqlState(err) != "42501":
			e.Fatalf("%s: an unscoped accept as the restricted role: err = %v, want SQLSTATE 42501 or success", name, err)
		case stored != 0:
			e.Fatalf("%s: a refused accept stored %d receipts", name, stored)
		}
		for _, w := range []acceptWay{ownScopedWay, callerTxWay} {
			drafts := shape(c + "." + w.name)
			res, err := e.acceptOn(t.app, w, plan(drafts...), func() bool { return true })
			e.must(err, name+": a scoped accept as the restricted role ("+w.name+")")
			for i, o := range e.resolve(drafts, res) {
				e.wantOutcomes([]outcome{o}, []outcome{{"accepted", drafts[i].ID, ""}})
				e.state(drafts[i].ID)
			}
		}
	}

	// A plan of several scopes leaves the caller's transaction without a
	// scope, on every node: it sees nothing more.
	ends := []*driver.Draft{draft(tenantA, "c.end", "1"), draft(tenantB, "c.end", "2"), draft(global, "c.end", "3")}
	groups := plan(ends...)
	endTx := e.begin(t.app)
	if _, applied, err := e.drv.EnsureScope(e.ctx, endTx, groups[0].Scope); err != nil || !applied {
		e.Fatalf("EnsureScope on a new transaction: applied %v, %v", applied, err)
	}
	_, err := e.drv.Accept(e.ctx, &driver.AcceptPlan{Tx: endTx, Groups: groups})
	e.must(err, "a plan of several scopes in the caller's transaction")
	for _, table := range []string{"pginbox_receipts", "pginbox_work"} {
		if n := e.visible(endTx, table); n != 0 {
			e.Fatalf("after a plan of several scopes the caller's transaction sees %d rows of %s, want none", n, table)
		}
	}
	e.must(endTx.Commit(e.ctx), "commit")
	for _, d := range ends {
		e.state(d.ID)
	}

	// A transaction of tenant-a cannot write into tenant-b, nor a
	// statement Scoped to it. (A plan in a caller's transaction has the
	// transaction's scope for its first group: AcceptTx refuses a
	// mismatch before the driver runs.)
	d := draft(tenantB, "c.x", "own")
	insert := func(q db.DBTX) error {
		return db.New(q).ReceiptInsertRouted(e.ctx, db.ReceiptInsertRoutedParams{
			ID: d.ID, ScopeKind: "tenant", ScopeID: "tenant-b", Source: "drivertest", Consumer: "c.x", MessageID: "own",
			EventType: d.EventType, SchemaVersion: 1, Fingerprint: d.Fingerprint[:], Payload: &d.Payload, Metadata: d.Metadata, MaxAttempts: 3,
		})
	}
	tx := e.begin(t.app)
	e.must(e.drv.SetScope(e.ctx, tx, driver.ScopeParams(tenantA)), "SetScope")
	if err := insert(tx); sqlState(err) != "42501" {
		e.Fatalf("an insert of tenant-b in a transaction of tenant-a: err = %v, want SQLSTATE 42501", err)
	}
	e.must(tx.Rollback(e.ctx), "rollback")
	if err := insert(e.drv.Scoped(t.app, tenantA)); sqlState(err) != "42501" {
		e.Fatalf("an insert of tenant-b Scoped to tenant-a: err = %v, want SQLSTATE 42501", err)
	}
	_, err = db.New(e.drv.Scoped(t.app, tenantA)).ReceiptAccept(e.ctx, db.ReceiptAcceptParams{
		ID: d.ID, ScopeKind: "tenant", ScopeID: "tenant-b", Source: "drivertest", Consumer: "c.x", MessageID: "own",
		EventType: d.EventType, SchemaVersion: 1, Fingerprint: d.Fingerprint[:], Payload: &d.Payload, Metadata: d.Metadata, MaxAttempts: 3,
	})
	if sqlState(err) != "42501" {
		e.Fatalf("ReceiptAccept of tenant-b Scoped to tenant-a: err = %v, want SQLSTATE 42501", err)
	}
	if n := e.count("SELECT count(*) FROM pginbox_receipts WHERE consumer = 'c.x'"); n != 0 {
		e.Fatalf("%d receipts written into another scope", n)
	}

	// The outbox: an event takes its transaction's scope; without one it
	// is refused.
	ev := func(tx pgx.Tx) error {
		return e.drv.Outbox().Insert(e.ctx, db.New(tx), eventParams(""))
	}
	tx = e.begin(t.app)
	e.must(e.drv.SetScope(e.ctx, tx, driver.ScopeParams(tenantA)), "SetScope")
	e.must(ev(tx), "an event in the transaction's scope")
	e.must(tx.Commit(e.ctx), "commit")
	if n := e.count("SELECT count(*) FROM pginbox_outbox WHERE scope_kind = 'tenant' AND scope_id = 'tenant-a'"); n != 1 {
		e.Fatal("the event was not stored in its transaction's scope")
	}
	tx = e.begin(t.app)
	if err := ev(tx); sqlState(err) != "42501" {
		e.Fatalf("an event without a scope as the restricted role: err = %v, want SQLSTATE 42501", err)
	}
	e.must(tx.Rollback(e.ctx), "rollback")
}

// The worker's statements on the application role: the handler
// transaction Opening and OpenTx open has the receipt's scope, so its
// ReceiptStart completes the receipt there and not from another scope;
// ReceiptFail with the driver's scope likewise.
func scopeHandler(e *env) {
	a1, a2, b1, g1 := e.seeded()
	t := e.enableTenancy()
	byID := e.claimAll(a1, a2, b1, g1)

	// tenant-b's scope, tenant-a's receipt: invisible, so not completed.
	r := byID[a1.ID]
	h := e.startFenced(t.app, tenantB, []string{r.ID.UUIDString()}, []string{r.ClaimToken.UUIDString()})
	if len(h.rows) != 0 {
		e.Fatal("a handler transaction of tenant-b completed a receipt of tenant-a")
	}
	h.rollback()
	h = e.start(t.app, tenantA, r)
	if len(h.rows) != 1 || h.rows[0].Payload == nil || *h.rows[0].Payload != a1.Payload {
		e.Fatalf("the handler transaction of the receipt's scope got %+v", h.rows)
	}
	if n := e.visible(h.conn, "pginbox_receipts"); n != 2 {
		e.Fatalf("the handler transaction sees %d receipts, want tenant-a's 2", n)
	}
	h.commit(false)
	e.wantStatus(a1.ID, "COMPLETED")

	conn, done := e.conn(t.app)
	_, err := e.drv.OpenTx(e.ctx, conn, tenantB, 30_000)
	e.must(err, "OpenTx")
	if n := e.visible(conn, "pginbox_receipts"); n != 1 {
		e.Fatalf("a transaction OpenTx opened for tenant-b sees %d receipts, want 1", n)
	}
	done()

	// The row's scope given, tenant-b's applied.
	if _, err := db.New(e.drv.Scoped(t.app, tenantB)).ReceiptFail(e.ctx, db.ReceiptFailParams{
		DelayMs: 0, LastError: "x", ScopeID: "tenant-a", ID: a2.ID, ClaimToken: byID[a2.ID].ClaimToken,
	}); !errors.Is(err, pgx.ErrNoRows) {
		e.Fatalf("fail of a tenant-a receipt in tenant-b's scope: err = %v, want pgx.ErrNoRows", err)
	}
	e.wantStatus(a2.ID, "PROCESSING")
	if _, err := e.fail(t.app, byID[a2.ID], false, 0); err != nil {
		e.Fatalf("fail in the receipt's scope as the application role: %v", err)
	}
	e.wantStatus(a2.ID, "RETRYABLE")
	if _, err := e.fail(t.app, byID[b1.ID], true, 0); err != nil {
		e.Fatalf("fail in the receipt's scope as the application role: %v", err)
	}
	e.wantStatus(b1.ID, "DEAD")
}
