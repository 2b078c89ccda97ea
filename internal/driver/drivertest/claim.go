package drivertest

import (
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/driver"
)

// claim: PENDING/RETRYABLE -> PROCESSING (ReceiptClaim; Citus:
// ReceiptDueScopes, ReceiptClaimScope), and complete: PROCESSING ->
// COMPLETED (ReceiptStart, in the handler's transaction Opening opens).
var claimCases = []testCase{
	{"DueOnly", claimDueOnly},
	{"Turns", claimTurns},
	{"Fencing", claimFencing},
	{"Opening", claimOpening},
}

// wantClaimed fails the case unless rows are exactly want, in any order.
func (e *env) wantClaimed(what string, rows []db.ReceiptClaimScopeRow, want ...inboxtype.ID) {
	e.Helper()
	got := claimIDs(rows)
	slices.SortFunc(got, compareIDs)
	want = slices.Clone(want)
	slices.SortFunc(want, compareIDs)
	if !slices.Equal(got, want) {
		e.Fatalf("%s: claimed %v, want %v", what, got, want)
	}
}

func compareIDs(a, b inboxtype.ID) int {
	switch {
	case a.String() < b.String():
		return -1
	case a.String() > b.String():
		return 1
	}
	return 0
}

// A claim serves due receipts only: PENDING, and RETRYABLE once its
// available_at passed; never BLOCKED, nor PROCESSING (a live lease, or an
// expired one, which recovery returns first), nor DEAD; and only of the
// claimer's consumers. A claimed receipt is PROCESSING under the claim's
// token, its attempt counted, and the row tells what the worker needs.
func claimDueOnly(e *env) {
	r1, r2 := draft(tenantA, consumer, "r1"), draft(tenantB, consumer, "r2")
	k1, k2 := keyed(draft(tenantA, consumer, "k1"), "K"), keyed(draft(tenantA, consumer, "k2"), "K")
	dead := draft(global, consumer, "dead")
	other := draft(tenantA, "c.other", "o1")
	e.accept(r1, r2, k1, k2, dead, other)

	first := e.claimer(lease)
	rows, _ := e.claim(first, 16, 100)
	e.wantClaimed("the first claim", rows, r1.ID, r2.ID, k1.ID, dead.ID)
	for _, r := range rows {
		s := e.wantStatus(r.ID, "PROCESSING")
		if s.Token != r.ClaimToken.UUIDString() || !s.LeaseLive || s.Attempts != 1 || r.Attempts != 1 {
			e.Fatalf("claimed %s: stored %+v, row token %s attempts %d", r.ID, s, r.ClaimToken, r.Attempts)
		}
		if r.Consumer != consumer || r.Source != "drivertest" || r.EventType != "drivertest.event" ||
			r.SchemaVersion != 1 || r.MaxAttempts != 3 || r.ScopeKind != s.ScopeKind || r.ScopeID != s.ScopeID || r.CreatedAt.IsZero() {
			e.Fatalf("claimed row %+v does not describe the receipt (%+v)", r, s)
		}
	}
	byID := map[inboxtype.ID]db.ReceiptClaimScopeRow{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	// r1 retries in an hour, r2 now; dead is spent; k1 stays PROCESSING.
	_, err := e.fail(e.pool, byID[r1.ID], false, time.Hour)
	e.must(err, "fail r1")
	_, err = e.fail(e.pool, byID[r2.ID], false, 0)
	e.must(err, "fail r2")
	_, err = e.fail(e.pool, byID[dead.ID], true, 0)
	e.must(err, "fail dead")
	p1 := draft(tenantC, consumer, "p1")
	e.accept(p1)

	second := e.claimer(lease)
	rows, _ = e.claim(second, 16, 100)
	e.wantClaimed("the second claim", rows, r2.ID, p1.ID)
	if s := e.state(r2.ID); s.Attempts != 2 {
		e.Fatalf("a retried receipt claimed again has attempts %d, want 2", s.Attempts)
	}
	rows, more := e.claim(second, 16, 100)
	e.wantClaimed("a claim with nothing due", rows)
	if more {
		e.Fatal("an empty claim reports more")
	}

	// Due once available_at passed.
	e.exec("UPDATE pginbox_work SET available_at = now() - interval '1 second' WHERE receipt_id = $1 AND scope_id = $2", r1.ID, "tenant-a")
	rows, _ = e.claim(second, 16, 100)
	e.wantClaimed("after r1's retry came due", rows, r1.ID)

	// An expired lease is recovery's, not a claim's.
	e.exec("UPDATE pginbox_work SET lease_expires_at = now() - interval '1 second' WHERE receipt_id = $1 AND scope_id = $2", k1.ID, "tenant-a")
	rows, _ = e.claim(e.claimer(lease), 16, 100)
	e.wantClaimed("with k1's lease expired", rows)
	e.wantStatus(k2.ID, "BLOCKED")
	e.wantStatus(other.ID, "PENDING")

	// n bounds a claim.
	var more3 []*driver.Draft
	for i := range 5 {
		more3 = append(more3, draft(tenantA, "c.bound", fmt.Sprint(i)))
	}
	e.accept(more3...)
	rows, more = e.claim(e.claimer(lease, "c.bound"), 16, 3)
	if len(rows) != 3 || !more {
		e.Fatalf("a claim of 3 with 5 due: %d rows, more %v; want 3, true", len(rows), more)
	}
}

// Scopes are served in turns, each with an equal share: a tenant's
// backlog does not hold back another tenant's message beyond one claim, and
// two backlogs share a claim.
func claimTurns(e *env) {
	var hot []*driver.Draft
	for i := range 100 {
		hot = append(hot, draft(tenantA, consumer, fmt.Sprintf("hot-%03d", i)))
	}
	e.accept(hot...)
	cold := draft(tenantB, consumer, "cold")
	e.accept(cold)

	c := e.claimer(lease)
	rows, more := e.claim(c, 2, 10)
	if !slices.Contains(claimIDs(rows), cold.ID) {
		e.Fatalf("the first claim behind a 100-message backlog of another tenant: %d rows without the cold tenant's message", len(rows))
	}
	if len(rows) > 10 || !more {
		e.Fatalf("first claim: %d rows, more %v; want at most 10, and more", len(rows), more)
	}
	// Drained in claims of 10, every receipt exactly once.
	seen := map[inboxtype.ID]bool{}
	claims := 1
	for {
		for _, r := range rows {
			if seen[r.ID] {
				e.Fatalf("receipt %s claimed twice", r.ID)
			}
			seen[r.ID] = true
		}
		if len(rows) == 0 {
			break
		}
		if claims++; claims > 40 {
			e.Fatal("101 receipts not drained in 40 claims of 10")
		}
		rows, _ = e.claim(c, 2, 10)
		if len(rows) > 10 {
			e.Fatalf("a claim of 10 returned %d rows", len(rows))
		}
	}
	if len(seen) != 101 {
		e.Fatalf("drained %d receipts, want 101", len(seen))
	}

	// Two backlogs share a claim equally; a claim of one scope serves one.
	for _, s := range []inboxtype.Scope{tenantA, tenantC} {
		var ds []*driver.Draft
		for i := range 20 {
			ds = append(ds, draft(s, "c.pair", fmt.Sprint(i)))
		}
		e.accept(ds...)
	}
	pair := e.claimer(lease, "c.pair")
	rows, _ = e.claim(pair, 2, 10)
	per := map[string]int{}
	for _, r := range rows {
		per[r.ScopeID]++
	}
	if per["tenant-a"] != 5 || per["tenant-c"] != 5 {
		e.Fatalf("a claim of 10 over two scopes with backlogs served %v, want 5 each", per)
	}
	rows, _ = e.claim(pair, 1, 10)
	per = map[string]int{}
	for _, r := range rows {
		per[r.ScopeID]++
	}
	// On the worker nodes a claim's rows are shared among the nodes: one
	// scope served takes that node's share only.
	if len(per) != 1 || (len(rows) != 10 && e.nodes == nil) {
		e.Fatalf("a claim of 10 serving at most one scope served %v", per)
	}
}

// Each claim fences its receipts with a token of its own: ReceiptStart
// completes a receipt only with the token of its current claim, and only in
// its scope; a rolled back handler transaction leaves it PROCESSING.
func claimFencing(e *env) {
	d1, d2, d3 := draft(tenantA, consumer, "d1"), draft(tenantA, consumer, "d2"), draft(tenantA, consumer, "d3")
	e.accept(d1, d2, d3)
	rows, _ := e.claim(e.claimer(time.Hour), 16, 2)
	d4 := draft(tenantA, consumer, "d4")
	e.accept(d4)
	later, _ := e.claim(e.claimer(lease), 16, 16)
	if len(rows) != 2 || len(later) != 2 {
		e.Fatalf("claims of 2 and 16 over 4 due: %d and %d rows", len(rows), len(later))
	}
	for _, a := range rows {
		for _, b := range later {
			if a.ClaimToken == b.ClaimToken {
				e.Fatal("two claims gave the same token")
			}
		}
		if a.ClaimToken.IsZero() {
			e.Fatal("a claim without a token")
		}
	}
	var secs float64
	e.must(e.pool.QueryRow(e.ctx, "SELECT extract(epoch FROM lease_expires_at - now())::float8 FROM pginbox_work WHERE receipt_id = $1 AND scope_id = 'tenant-a'",
		rows[0].ID).Scan(&secs), "reading the lease")
	if secs < 3000 || secs > 3700 {
		e.Fatalf("a claim with a lease of an hour holds it for %.0f s", secs)
	}

	held := rows[0]
	s := e.state(held.ID)
	// A wrong token, a wrong scope: nothing.
	h := e.startFenced(e.pool, tenantA, []string{held.ID.UUIDString()}, []string{inboxtype.New().UUIDString()})
	if len(h.rows) != 0 {
		e.Fatal("ReceiptStart completed a receipt with a wrong token")
	}
	h.rollback()
	h = e.start(e.pool, tenantB, db.ReceiptClaimScopeRow{ID: held.ID, ClaimToken: held.ClaimToken})
	if len(h.rows) != 0 {
		e.Fatal("ReceiptStart completed a receipt of another scope")
	}
	h.rollback()
	if now := e.wantStatus(held.ID, "PROCESSING"); !sameState(now, s) {
		e.Fatalf("a fenced-out ReceiptStart changed the receipt: %+v, was %+v", now, s)
	}

	// The right token completes it and loads its content; a rollback
	// undoes that.
	h = e.start(e.pool, tenantA, held)
	if len(h.rows) != 1 || h.rows[0].ID != held.ID {
		e.Fatalf("ReceiptStart with the claim's token returned %d rows", len(h.rows))
	}
	var want *driver.Draft
	for _, d := range []*driver.Draft{d1, d2, d3, d4} {
		if d.ID == held.ID {
			want = d
		}
	}
	got := h.rows[0]
	if got.Payload == nil || *got.Payload != want.Payload || got.Consumer != consumer || got.OrderingKey != nil {
		e.Fatalf("ReceiptStart returned %+v for %+v", got, want)
	}
	if n := e.count("SELECT count(*) FROM pginbox_receipts WHERE id = $1 AND metadata = $2::jsonb", held.ID, got.Metadata); n != 1 {
		e.Fatalf("ReceiptStart returned metadata %s, not the receipt's", got.Metadata)
	}
	h.rollback()
	e.wantStatus(held.ID, "PROCESSING")
	h = e.start(e.pool, tenantA, held)
	if len(h.rows) != 1 {
		e.Fatal("ReceiptStart after a rolled back one completed nothing")
	}
	h.commit(false)
	if s := e.wantStatus(held.ID, "COMPLETED"); s.Work || s.Attempts != 1 || s.Payload == nil {
		e.Fatalf("completed receipt stored as %+v", s)
	}
	// Completed: its token completes nothing any more.
	h = e.start(e.pool, tenantA, held)
	if len(h.rows) != 0 {
		e.Fatal("ReceiptStart completed a completed receipt again")
	}
	h.rollback()

	// A stale token: released and claimed again, the old claim is fenced
	// out, the new one completes; one ReceiptStart completes several.
	stale := rows[1]
	n, err := db.New(e.pool).ReceiptRelease(e.ctx, db.ReceiptReleaseParams{ScopeID: stale.ScopeID, ID: stale.ID, ClaimToken: stale.ClaimToken})
	e.must(err, "release")
	if n != 1 {
		e.Fatal("release with the claim's token released nothing")
	}
	reclaimed, _ := e.claim(e.claimer(lease), 16, 16)
	e.wantClaimed("after the release", reclaimed, stale.ID)
	h = e.start(e.pool, tenantA, stale)
	if len(h.rows) != 0 {
		e.Fatal("ReceiptStart completed a receipt with the token of a released claim")
	}
	h.rollback()
	h = e.start(e.pool, tenantA, append(reclaimed, later...)...)
	if len(h.rows) != 3 {
		e.Fatalf("ReceiptStart of 3 held receipts completed %d", len(h.rows))
	}
	h.commit(false)
	for _, r := range append(reclaimed, later...) {
		e.wantStatus(r.ID, "COMPLETED")
	}
}

// Opening opens the handler's transaction with its scope, its timeouts and
// the server process running it; OpenTx does the same without a statement.
func claimOpening(e *env) {
	d := draft(tenantA, consumer, "d1")
	e.accept(d)
	row := e.claimOne(d.ID)
	h := e.start(e.pool, tenantA, row)
	e.checkHandlerTx(h.conn, h.pid, "tenant-a", "1min")
	h.commit(false)
	e.wantStatus(d.ID, "COMPLETED")

	// With the session's plans made again first, and without the PID.
	d2 := draft(global, consumer, "d2")
	e.accept(d2)
	row = e.claimOne(d2.ID)
	conn, done := e.conn(e.pool)
	open := e.drv.Opening(conn, global, driver.Open{TimeoutMs: 45_000, DiscardPlans: true})
	rows, err := db.New(open).ReceiptStart(e.ctx, db.ReceiptStartParams{ScopeID: "", Ids: []string{row.ID.UUIDString()}, Tokens: []string{row.ClaimToken.UUIDString()}})
	e.must(err, "ReceiptStart")
	if len(rows) != 1 || rows[0].Payload == nil || *rows[0].Payload != d2.Payload {
		e.Fatalf("ReceiptStart after DISCARD PLANS returned %+v", rows)
	}
	var backend int32
	e.must(conn.QueryRow(e.ctx, "SELECT pg_backend_pid()").Scan(&backend), "pg_backend_pid")
	e.checkHandlerTx(conn, uint32(backend), "", "45s")
	_, err = conn.Exec(e.ctx, "COMMIT")
	e.must(err, "COMMIT")
	done()
	e.wantStatus(d2.ID, "COMPLETED")

	conn, done = e.conn(e.pool)
	defer done()
	pid, err := e.drv.OpenTx(e.ctx, conn, tenantB, 30_000)
	e.must(err, "OpenTx")
	e.checkHandlerTx(conn, pid, "tenant-b", "30s")
	_, err = conn.Exec(e.ctx, "ROLLBACK")
	e.must(err, "ROLLBACK")

	pid, err = e.drv.OpenTx(e.ctx, conn, global, 30_000)
	e.must(err, "OpenTx")
	e.checkHandlerTx(conn, pid, "", "30s")
	_, err = conn.Exec(e.ctx, "COMMIT")
	e.must(err, "COMMIT")
}

// checkHandlerTx checks the transaction open on conn: pid is its server
// process, it has the tenant (the global scope for ""), and its statement
// and idle timeouts are timeout.
func (e *env) checkHandlerTx(conn *pgxpool.Conn, pid uint32, tenant, timeout string) {
	e.Helper()
	if st := conn.Conn().PgConn().TxStatus(); st != 'T' {
		e.Fatalf("the handler transaction is not open: status %q", st)
	}
	var backend int32
	var gotTenant, gotGlobal, stmt, idle string
	err := conn.QueryRow(e.ctx, `SELECT pg_backend_pid(), coalesce(current_setting('pginbox.tenant', true), ''),
		coalesce(current_setting('pginbox.global', true), ''), current_setting('statement_timeout'),
		current_setting('idle_in_transaction_session_timeout')`).Scan(&backend, &gotTenant, &gotGlobal, &stmt, &idle)
	e.must(err, "reading the handler transaction's settings")
	if pid == 0 || pid != uint32(backend) {
		e.Fatalf("the handler transaction reported server process %d, runs in %d", pid, backend)
	}
	if gotTenant != tenant || (gotGlobal == "on") != (tenant == "") {
		e.Fatalf("the handler transaction has tenant=%q global=%q, want tenant %q", gotTenant, gotGlobal, tenant)
	}
	if stmt != timeout || idle != timeout {
		e.Fatalf("the handler transaction's timeouts are %s and %s, want %s", stmt, idle, timeout)
	}
}
