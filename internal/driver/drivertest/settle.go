package drivertest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/pipetx"
)

// What becomes of a claim besides its completion: fail (ReceiptFail, with
// the driver's scope), heartbeat (ReceiptHeartbeat), recover
// (ReceiptExpiredScopes, ReceiptRecover), release (ReceiptRelease).
var settleCases = []testCase{
	{"Fail", settleFail},
	{"Heartbeat", settleHeartbeat},
	{"Recover", settleRecover},
	{"Release", settleRelease},
}

// fail: PROCESSING -> RETRYABLE after the backoff, or DEAD (the receipt
// too) when the failure is permanent or the attempts are spent; fenced by
// the claim's token and the receipt's scope.
func settleFail(e *env) {
	retry, perm, spent := draft(tenantA, consumer, "retry"), draft(global, consumer, "perm"), draft(tenantB, consumer, "spent")
	e.accept(retry, perm, spent)
	byID := e.claimAll(retry, perm, spent)

	// Fenced: a wrong token, another scope.
	r := byID[retry.ID]
	before := e.state(retry.ID)
	wrong := r
	wrong.ClaimToken = inboxtype.New()
	if _, err := e.fail(e.pool, wrong, false, 0); !errors.Is(err, pgx.ErrNoRows) {
		e.Fatalf("fail with a wrong token: err = %v, want pgx.ErrNoRows", err)
	}
	elsewhere := r
	elsewhere.ScopeID = "tenant-b"
	if _, err := e.fail(e.pool, elsewhere, false, 0); !errors.Is(err, pgx.ErrNoRows) {
		e.Fatalf("fail in another scope: err = %v, want pgx.ErrNoRows", err)
	}
	if s := e.state(retry.ID); !sameState(s, before) {
		e.Fatalf("a fenced-out failure changed the receipt: %+v, was %+v", s, before)
	}

	got, err := e.fail(e.pool, r, false, time.Hour)
	e.must(err, "fail")
	s := e.state(retry.ID)
	if got.Status != "RETRYABLE" || s.Status != "RETRYABLE" || s.ReceiptStatus != "PENDING" || s.Due || s.Token != "" ||
		s.LeaseLive || s.Attempts != 1 || s.LastError == nil || *s.LastError != "drivertest failure" || !got.AvailableAt.After(time.Now().Add(50*time.Minute)) {
		e.Fatalf("failed with a backoff of an hour: returned %+v, stored %+v", got, s)
	}
	// Its token is spent.
	if _, err := e.fail(e.pool, r, false, 0); !errors.Is(err, pgx.ErrNoRows) {
		e.Fatalf("a second failure with the same token: err = %v, want pgx.ErrNoRows", err)
	}

	got, err = e.fail(e.pool, byID[perm.ID], true, 0)
	e.must(err, "fail")
	if s := e.state(perm.ID); got.Status != "DEAD" || s.Status != "DEAD" || s.ReceiptStatus != "DEAD" || !s.Work || s.Attempts != 1 {
		e.Fatalf("a permanent failure: returned %+v, stored %+v", got, s)
	}

	// Spent: the third attempt of three fails DEAD.
	row := byID[spent.ID]
	for attempt := 1; attempt <= 3; attempt++ {
		got, err := e.fail(e.pool, row, false, 0)
		e.must(err, "fail")
		want := "RETRYABLE"
		if attempt == 3 {
			want = "DEAD"
		}
		if s := e.state(spent.ID); got.Status != want || s.Status != want || s.Attempts != int32(attempt) {
			e.Fatalf("attempt %d of 3 failed: returned %s, stored %+v; want %s", attempt, got.Status, s, want)
		}
		if attempt < 3 {
			row = e.claimOne(spent.ID)
		}
	}
	if s := e.state(spent.ID); s.ReceiptStatus != "DEAD" {
		e.Fatalf("spent receipt's own status %s, want DEAD", s.ReceiptStatus)
	}
	rows, _ := e.claim(e.claimer(lease), 16, 16)
	e.wantClaimed("after the failures", rows)
}

// heartbeat: extends the leases a worker still holds, per scope, and
// reports the ones it lost; a receipt a handler's transaction holds is
// skipped, not waited for.
func settleHeartbeat(e *env) {
	a1, a2, a3, b1 := draft(tenantA, consumer, "a1"), draft(tenantA, consumer, "a2"), draft(tenantA, consumer, "a3"), draft(tenantB, consumer, "b1")
	e.accept(a1, a2, a3, b1)
	byID := e.claimAll(a1, a2, a3, b1)
	e.exec("UPDATE pginbox_work SET lease_expires_at = now() + interval '2 seconds' WHERE consumer = $1", consumer)
	lease := func(id inboxtype.ID) float64 {
		var secs float64
		e.must(e.pool.QueryRow(e.ctx, "SELECT extract(epoch FROM lease_expires_at - now())::float8 FROM pginbox_work WHERE receipt_id = $1", id).Scan(&secs), "reading the lease")
		return secs
	}
	beat := func(s inboxtype.Scope, held ...db.ReceiptClaimScopeRow) []inboxtype.ID {
		e.Helper()
		p := db.ReceiptHeartbeatParams{ScopeID: s.ID, LeaseMs: time.Hour.Milliseconds()}
		for _, r := range held {
			p.Ids = append(p.Ids, r.ID.UUIDString())
			p.Tokens = append(p.Tokens, r.ClaimToken.UUIDString())
		}
		// A heartbeat that waited for a handler would hang here.
		ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
		defer cancel()
		lost, err := db.New(e.pool).ReceiptHeartbeat(ctx, p)
		e.must(err, "heartbeat")
		return lost
	}
	if lost := beat(tenantA, byID[a1.ID], byID[a2.ID]); len(lost) != 0 {
		e.Fatalf("heartbeat of held leases reported %v lost", lost)
	}
	if lost := beat(tenantB, byID[b1.ID]); len(lost) != 0 {
		e.Fatalf("heartbeat of a held lease reported %v lost", lost)
	}
	for _, id := range []inboxtype.ID{a1.ID, a2.ID, b1.ID} {
		if secs := lease(id); secs < 3000 {
			e.Fatalf("a heartbeat of an hour left %.0f s of lease", secs)
		}
	}
	if secs := lease(a3.ID); secs > 60 {
		e.Fatalf("a heartbeat extended a lease it was not given: %.0f s", secs)
	}

	// Lost: released, a wrong token, the wrong scope.
	r2 := byID[a2.ID]
	n, err := db.New(e.pool).ReceiptRelease(e.ctx, db.ReceiptReleaseParams{ScopeID: r2.ScopeID, ID: r2.ID, ClaimToken: r2.ClaimToken})
	e.must(err, "release")
	if n != 1 {
		e.Fatal("release released nothing")
	}
	wrong := byID[a1.ID]
	wrong.ClaimToken = inboxtype.New()
	lost := beat(tenantA, wrong, r2, byID[a3.ID])
	slices.SortFunc(lost, compareIDs)
	want := []inboxtype.ID{a1.ID, a2.ID}
	slices.SortFunc(want, compareIDs)
	if !slices.Equal(lost, want) {
		e.Fatalf("heartbeat reported %v lost, want %v", lost, want)
	}
	if lost := beat(tenantB, byID[a3.ID]); len(lost) != 1 || lost[0] != a3.ID {
		e.Fatalf("heartbeat in another scope than the receipt's reported %v lost, want [%s]", lost, a3.ID)
	}

	// A running handler's receipt: neither extended nor lost.
	e.exec("UPDATE pginbox_work SET lease_expires_at = now() + interval '2 seconds' WHERE receipt_id = $1 AND scope_id = 'tenant-a'", a3.ID)
	h := e.start(e.pool, tenantA, byID[a3.ID])
	if len(h.rows) != 1 {
		e.Fatal("ReceiptStart completed nothing")
	}
	if lost := beat(tenantA, byID[a3.ID]); len(lost) != 0 {
		e.Fatalf("heartbeat of a receipt a handler runs reported %v lost", lost)
	}
	if secs := lease(a3.ID); secs > 60 {
		e.Fatalf("heartbeat extended the lease of a receipt a handler's transaction holds: %.0f s", secs)
	}
	h.commit(false)
	e.wantStatus(a3.ID, "COMPLETED")
}

// recover: PROCESSING with an expired lease -> RETRYABLE, due now, or DEAD
// when its attempts are spent; only the given consumers', never one a
// handler's transaction holds; the old claim is fenced out after it.
func settleRecover(e *env) {
	r1, r2, live, mine, running := draft(tenantA, consumer, "r1"), draft(tenantB, consumer, "r2"), draft(tenantA, consumer, "live"),
		draft(tenantA, "c.other", "mine"), draft(global, consumer, "running")
	e.accept(r1, r2, live, mine, running)
	byID := e.claimAll(r1, r2, live, mine, running)
	// r2 on its last attempt.
	e.exec("UPDATE pginbox_work SET attempts = max_attempts WHERE receipt_id = $1 AND scope_id = 'tenant-b'", r2.ID)
	e.exec(`UPDATE pginbox_work SET lease_expires_at = now() - interval '1 second'
		WHERE receipt_id = ANY($1::uuid[])`, []string{r1.ID.UUIDString(), r2.ID.UUIDString(), mine.ID.UUIDString(), running.ID.UUIDString()})
	h := e.start(e.pool, global, byID[running.ID])

	scopes, err := db.New(pipetx.FanOut{Pool: e.pool}).ReceiptExpiredScopes(e.ctx, db.ReceiptExpiredScopesParams{Consumers: []string{consumer}, MaxCount: 100})
	e.must(err, "listing the scopes with expired leases")
	slices.Sort(scopes)
	if !slices.Equal(scopes, []string{"", "tenant-a", "tenant-b"}) {
		e.Fatalf("scopes with expired leases: %q, want the global scope, tenant-a and tenant-b", scopes)
	}
	recovered := map[inboxtype.ID]string{}
	for _, s := range scopes {
		got, err := db.New(e.pool).ReceiptRecover(e.ctx, db.ReceiptRecoverParams{ScopeID: s, Consumers: []string{consumer}, MaxCount: 100})
		e.must(err, "recover")
		for _, r := range got {
			if r.Consumer != consumer {
				e.Fatalf("recovered a receipt of consumer %s", r.Consumer)
			}
			recovered[r.ID] = r.Status
		}
	}
	if len(recovered) != 2 || recovered[r1.ID] != "RETRYABLE" || recovered[r2.ID] != "DEAD" {
		e.Fatalf("recovered %v, want r1 RETRYABLE and r2 DEAD", recovered)
	}
	s := e.state(r1.ID)
	if s.Status != "RETRYABLE" || !s.Due || s.Token != "" || s.LeaseLive || s.LastError == nil || !strings.Contains(*s.LastError, "lease expired") {
		e.Fatalf("recovered receipt stored as %+v", s)
	}
	if s := e.state(r2.ID); s.Status != "DEAD" || s.ReceiptStatus != "DEAD" {
		e.Fatalf("recovered spent receipt stored as %+v", s)
	}
	e.wantStatus(live.ID, "PROCESSING")
	e.wantStatus(mine.ID, "PROCESSING")

	// The handler that outlived its lease still owns its receipt.
	h.commit(false)
	e.wantStatus(running.ID, "COMPLETED")

	// The old claim is fenced out: its start, failure and heartbeat.
	old := byID[r1.ID]
	hs := e.start(e.pool, tenantA, old)
	if len(hs.rows) != 0 {
		e.Fatal("ReceiptStart with the token of a recovered claim completed it")
	}
	hs.rollback()
	if _, err := e.fail(e.pool, old, false, 0); !errors.Is(err, pgx.ErrNoRows) {
		e.Fatalf("fail with the token of a recovered claim: err = %v, want pgx.ErrNoRows", err)
	}
	lost, err := db.New(e.pool).ReceiptHeartbeat(e.ctx, db.ReceiptHeartbeatParams{ScopeID: "tenant-a", LeaseMs: 60_000,
		Ids: []string{old.ID.UUIDString()}, Tokens: []string{old.ClaimToken.UUIDString()}})
	e.must(err, "heartbeat")
	if len(lost) != 1 {
		e.Fatal("heartbeat with the token of a recovered claim did not report it lost")
	}
	again := e.claimOne(r1.ID)
	if again.Attempts != 2 || again.ClaimToken == old.ClaimToken {
		e.Fatalf("claimed again after recovery: attempt %d, token %s (was %s)", again.Attempts, again.ClaimToken, old.ClaimToken)
	}
}

// release: PROCESSING -> PENDING (first attempt) or RETRYABLE (later
// ones), due, the attempt given back; fenced by the claim's token.
func settleRelease(e *env) {
	first, later := draft(tenantA, consumer, "first"), draft(tenantB, consumer, "later")
	e.accept(first, later)
	release := func(r db.ReceiptClaimScopeRow) int64 {
		e.Helper()
		n, err := db.New(e.pool).ReceiptRelease(e.ctx, db.ReceiptReleaseParams{ScopeID: r.ScopeID, ID: r.ID, ClaimToken: r.ClaimToken})
		e.must(err, "release")
		return n
	}
	byID := e.claimAll(first, later)
	r := byID[first.ID]
	wrong := r
	wrong.ClaimToken = inboxtype.New()
	if release(wrong) != 0 {
		e.Fatal("release with a wrong token released")
	}
	e.wantStatus(first.ID, "PROCESSING")
	if release(r) != 1 {
		e.Fatal("release with the claim's token released nothing")
	}
	if s := e.state(first.ID); s.Status != "PENDING" || s.Attempts != 0 || !s.Due || s.Token != "" || s.LeaseLive {
		e.Fatalf("released first attempt stored as %+v", s)
	}
	if release(r) != 0 {
		e.Fatal("a second release with the same token released")
	}

	_, err := e.fail(e.pool, byID[later.ID], false, 0)
	e.must(err, "fail")
	if release(e.claimAll(first, later)[later.ID]) != 1 {
		e.Fatal("release released nothing")
	}
	if s := e.state(later.ID); s.Status != "RETRYABLE" || s.Attempts != 1 || !s.Due || s.Token != "" {
		e.Fatalf("released second attempt stored as %+v", s)
	}
}
