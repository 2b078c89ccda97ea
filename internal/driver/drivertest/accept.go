package drivertest

import (
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/driver"
)

// accept: none -> PENDING (ReceiptAccept, ReceiptAcceptBatch; Citus:
// ReceiptAcceptRouted), and none -> PENDING or BLOCKED for keyed messages.
var acceptCases = []testCase{
	{"NewDuplicateConflict", acceptNewDuplicateConflict},
	{"WakeUp", acceptWakeUp},
	{"BatchRepeats", acceptBatchRepeats},
	{"SeveralScopes", acceptSeveralScopes},
	{"CallerTx", acceptCallerTx},
	{"Keyed", acceptKeyed},
	{"KeyLock", acceptKeyLock},
	{"CommitError", acceptCommitError},
}

// acceptChecked runs drafts' plan in way w with the workers' wake-up asked
// for, checks the wake-up (checkWake) and returns each draft's outcome.
func (e *env) acceptChecked(w acceptWay, l *listener, drafts ...*driver.Draft) []outcome {
	e.Helper()
	asked := 0
	res, err := e.acceptOn(e.pool, w, plan(drafts...), func() bool { asked++; return true })
	e.must(err, "accept ("+w.name+")")
	e.checkWake(l, res, drafts, asked, true)
	return e.resolve(drafts, res)
}

// checkWake checks a plan's wake-up: Wake asked at most once; a plan asked
// to wake the workers did; and Woken tells the truth, for every consumer
// of the drafts the plan inserted: woken, their workers were notified (by
// the time Accept returned, or at the caller's commit); not woken, they
// were not (the caller wakes them later, coalesced).
func (e *env) checkWake(l *listener, res *driver.Accepted, drafts []*driver.Draft, asked int, answer bool) {
	e.Helper()
	if asked > 1 {
		e.Fatalf("Wake asked %d times, want at most once", asked)
	}
	if len(res.Inserted) == 0 {
		l.since() // a duplicate may wake the workers or not
		return
	}
	if asked == 1 && answer && !res.Woken {
		e.Fatalf("Wake answered true, but Woken is false")
	}
	inserted := map[inboxtype.ID]bool{}
	for _, id := range res.Inserted {
		inserted[id] = true
	}
	notified := l.since()
	for _, d := range drafts {
		if !inserted[d.ID] {
			continue
		}
		got := slices.Contains(notified, d.Identity.Consumer)
		if got != res.Woken {
			e.Fatalf("Woken = %v, but %s was notified: %v (notifications %q)", res.Woken, d.Identity.Consumer, got, notified)
		}
	}
}

// A new identity is inserted PENDING with its content; a redelivery with
// the same content is reported as the existing receipt (a duplicate), with
// other content as the existing receipt with its fingerprint (a conflict);
// nothing is written for either. Every way, one message and a batch.
func acceptNewDuplicateConflict(e *env) {
	l := e.listen("pginbox_receipt")
	for _, w := range acceptWays {
		c := "c." + w.name
		d := draft(tenantA, c, "m1")
		e.wantOutcomes(e.acceptChecked(w, l, d), []outcome{{"accepted", d.ID, "PENDING"}})
		s := e.wantStatus(d.ID, "PENDING")
		if !s.Work || !s.Due || s.Attempts != 0 || s.Token != "" || s.Payload == nil || *s.Payload != d.Payload ||
			s.ScopeKind != "tenant" || s.ScopeID != "tenant-a" || s.Seq != nil {
			e.Fatalf("%s: new receipt stored as %+v", w.name, s)
		}
		if n := e.count("SELECT count(*) FROM pginbox_receipts WHERE id = $1 AND metadata = $2::jsonb AND fingerprint = $3",
			d.ID, d.Metadata, d.Fingerprint[:]); n != 1 {
			e.Fatalf("%s: the receipt's metadata or fingerprint is not the draft's", w.name)
		}

		e.wantOutcomes(e.acceptChecked(w, l, again(d)), []outcome{{"duplicate", d.ID, "PENDING"}})
		e.wantOutcomes(e.acceptChecked(w, l, changed(d)), []outcome{{"conflict", d.ID, "PENDING"}})

		// A batch: new identities, a redelivery and a conflict of stored ones.
		d2, d3 := draft(tenantA, c, "m2"), draft(tenantA, c, "m3")
		e.wantOutcomes(e.acceptChecked(w, l, d3, again(d), d2), []outcome{
			{"accepted", d3.ID, "PENDING"}, {"duplicate", d.ID, "PENDING"}, {"accepted", d2.ID, "PENDING"}})
		d4 := draft(tenantA, c, "m4")
		e.wantOutcomes(e.acceptChecked(w, l, changed(d2), d4), []outcome{
			{"conflict", d2.ID, "PENDING"}, {"accepted", d4.ID, "PENDING"}})

		// The global scope.
		g := draft(global, c, "g1")
		e.wantOutcomes(e.acceptChecked(w, l, g), []outcome{{"accepted", g.ID, "PENDING"}})
		if s := e.state(g.ID); s.ScopeKind != "global" || s.ScopeID != "" {
			e.Fatalf("%s: global receipt stored in scope %s/%q", w.name, s.ScopeKind, s.ScopeID)
		}
		e.wantOutcomes(e.acceptChecked(w, l, again(g)), []outcome{{"duplicate", g.ID, "PENDING"}})

		if n := e.count("SELECT count(*) FROM pginbox_receipts WHERE consumer = $1", c); n != 5 {
			e.Fatalf("%s: %d receipts stored, want 5", w.name, n)
		}
		if n := e.count("SELECT count(*) FROM pginbox_work WHERE consumer = $1", c); n != 5 {
			e.Fatalf("%s: %d work rows, want 5", w.name, n)
		}
	}
}

// Every plan shape on a connection of its own, with Wake answering true and
// false: Woken tells whether the workers were notified.
func acceptWakeUp(e *env) {
	l := e.listen("pginbox_receipt")
	shapes := []struct {
		name   string
		drafts func(c string) []*driver.Draft
	}{
		{"one", func(c string) []*driver.Draft { return []*driver.Draft{draft(tenantA, c, "1")} }},
		{"batch", func(c string) []*driver.Draft {
			return []*driver.Draft{draft(tenantA, c, "1"), draft(tenantA, c, "2")}
		}},
		{"scopes", func(c string) []*driver.Draft {
			return []*driver.Draft{draft(tenantA, c, "1"), draft(tenantB, c, "2"), draft(global, c, "3")}
		}},
		{"keyed", func(c string) []*driver.Draft {
			return []*driver.Draft{keyed(draft(tenantA, c, "1"), "k"), keyed(draft(tenantA, c, "2"), "k")}
		}},
	}
	for _, sh := range shapes {
		for _, w := range []acceptWay{ownWay, ownScopedWay} {
			for _, answer := range []bool{true, false} {
				c := fmt.Sprintf("c.%s.%s.%v", sh.name, w.name, answer)
				drafts := sh.drafts(c)
				asked := 0
				res, err := e.acceptOn(e.pool, w, plan(drafts...), func() bool { asked++; return answer })
				e.must(err, c)
				if len(res.Inserted) != len(drafts) {
					e.Fatalf("%s: inserted %d of %d", c, len(res.Inserted), len(drafts))
				}
				e.checkWake(l, res, drafts, asked, answer)
			}
		}
	}
	// In a caller's transaction the wake-up rides in it: at its commit.
	d := draft(tenantA, "c.tx", "1")
	res, err := e.acceptOn(e.pool, callerTxWay, plan(d), nil)
	e.must(err, "accept in a transaction")
	if !res.Woken {
		e.Fatalf("a plan in a caller's transaction: Woken false, want true (the wake-up rides in it)")
	}
	e.checkWake(l, res, []*driver.Draft{d}, 0, true)
}

// Repeats inside one batch: the Client plans each identity once (its first
// occurrence) and tells the repeats from the plan's result, against stored
// receipts and the batch's own inserts alike; keyed repeats take no number
// of their key.
func acceptBatchRepeats(e *env) {
	l := e.listen("pginbox_receipt")
	for _, w := range acceptWays {
		c := "c." + w.name
		p0, k0 := draft(tenantA, c, "p0"), keyed(draft(tenantA, c, "k0"), "K")
		e.accept(p0, k0)
		p1 := draft(tenantA, c, "p1")
		k1, k2 := keyed(draft(tenantA, c, "k1"), "K"), keyed(draft(tenantA, c, "k2"), "K")
		got := e.acceptChecked(w, l,
			p1, again(p1), changed(p1), again(p0), changed(p0), again(k0), k1, again(k1), changed(k1), k2)
		e.wantOutcomes(got, []outcome{
			{"accepted", p1.ID, "PENDING"}, {"duplicate", p1.ID, ""}, {"conflict", p1.ID, ""},
			{"duplicate", p0.ID, "PENDING"}, {"conflict", p0.ID, "PENDING"},
			{"duplicate", k0.ID, "PENDING"},
			{"accepted", k1.ID, ""}, {"duplicate", k1.ID, ""}, {"conflict", k1.ID, ""},
			{"accepted", k2.ID, ""},
		})
		for i, want := range []struct {
			d      *driver.Draft
			status string
			seq    int64
		}{{k0, "PENDING", 1}, {k1, "BLOCKED", 2}, {k2, "BLOCKED", 3}} {
			s := e.wantStatus(want.d.ID, want.status)
			if s.Seq == nil || *s.Seq != want.seq {
				e.Fatalf("%s: keyed receipt %d: ordering_seq %v, want %d", w.name, i, s.Seq, want.seq)
			}
		}
		if n := e.count("SELECT count(*) FROM pginbox_receipts WHERE consumer = $1", c); n != 5 {
			e.Fatalf("%s: %d receipts stored, want 5", w.name, n)
		}
	}
}

// A batch over several scopes, each receipt stored in its scope: in a
// transaction of the plan's own, or in the caller's, which has no scope
// after it, and whose rollback leaves nothing and wakes nobody.
func acceptSeveralScopes(e *env) {
	l := e.listen("pginbox_receipt")
	batch := func(c string) (all []*driver.Draft, b0 *driver.Draft) {
		b0 = draft(tenantB, c, "b0")
		e.accept(b0)
		return []*driver.Draft{
			draft(tenantB, c, "b1"), draft(tenantA, c, "a1"), again(b0), draft(global, c, "g1"),
			keyed(draft(tenantA, c, "ka"), "K"), draft(tenantC, c, "c1"), keyed(draft(tenantC, c, "kc"), "K"),
		}, b0
	}
	check := func(name string, got []outcome, drafts []*driver.Draft, b0 *driver.Draft) {
		e.Helper()
		for i, d := range drafts {
			if d.Identity.MessageID == "b0" {
				e.wantOutcomes(got[i:i+1], []outcome{{"duplicate", b0.ID, "PENDING"}})
				continue
			}
			e.wantOutcomes(got[i:i+1], []outcome{{"accepted", d.ID, "PENDING"}})
			s := e.wantStatus(d.ID, "PENDING")
			if s.ScopeKind != string(d.Identity.Scope.Kind) || s.ScopeID != d.Identity.Scope.ID {
				e.Fatalf("%s: %s stored in scope %s/%q", name, d.Identity, s.ScopeKind, s.ScopeID)
			}
		}
	}
	for _, w := range acceptWays {
		c := "c." + w.name
		drafts, b0 := batch(c)
		check(w.name, e.acceptChecked(w, l, drafts...), drafts, b0)
	}

	// The caller's transaction, by hand: its scope after the plan, and a
	// rollback.
	for _, commit := range []bool{false, true} {
		c := fmt.Sprintf("c.tx.%v", commit)
		drafts, b0 := batch(c)
		l.since() // b0's wake-up
		before := e.receipts()
		tx := e.begin(e.pool)
		groups := plan(drafts...)
		_, applied, err := e.drv.EnsureScope(e.ctx, tx, groups[0].Scope)
		e.must(err, "EnsureScope")
		if !applied {
			e.Fatal("EnsureScope did not apply the first group's scope to a new transaction")
		}
		res, err := e.drv.Accept(e.ctx, &driver.AcceptPlan{Tx: tx, Groups: groups})
		e.must(err, "accept in a transaction")
		if tenant, glob := e.txScope(tx); tenant != "" || glob != "" {
			e.Fatalf("after a plan of several scopes the caller's transaction has scope tenant=%q global=%q, want none", tenant, glob)
		}
		if slices.Contains(l.since(), c) {
			e.Fatal("the workers were woken before the caller's transaction ended")
		}
		if !commit {
			e.must(tx.Rollback(e.ctx), "rollback")
			if n := e.receipts(); n != before {
				e.Fatalf("%d receipts after the caller's rollback, want %d", n, before)
			}
			if slices.Contains(l.since(), c) {
				e.Fatal("a rolled back plan woke the workers")
			}
			continue
		}
		e.must(tx.Commit(e.ctx), "commit")
		e.checkWake(l, res, drafts, 0, true)
		check("caller-tx by hand", e.resolve(drafts, res), drafts, b0)
	}
}

// AcceptTx's part: EnsureScope gives a transaction without a scope the
// plan's, and reports the scope of one that has one, changing nothing; the
// plan rides in the caller's transaction, which its rollback undoes.
func acceptCallerTx(e *env) {
	l := e.listen("pginbox_receipt")
	ensure := func(setup func(tx pgx.Tx), s inboxtype.Scope, wantHave inboxtype.Scope, wantApplied bool) {
		e.Helper()
		tx := e.begin(e.pool)
		if setup != nil {
			setup(tx)
		}
		have, applied, err := e.drv.EnsureScope(e.ctx, tx, s)
		e.must(err, "EnsureScope")
		if have != wantHave || applied != wantApplied {
			e.Fatalf("EnsureScope(%v) = %v, %v; want %v, %v", s, have, applied, wantHave, wantApplied)
		}
		tenant, glob := e.txScope(tx)
		if want := wantHave.ID; tenant != want || (glob == "on") != (wantHave.Kind == inboxtype.ScopeGlobal) {
			e.Fatalf("after EnsureScope(%v) the transaction has tenant=%q global=%q, want the scope %v", s, tenant, glob, wantHave)
		}
		e.must(tx.Rollback(e.ctx), "rollback")
	}
	set := func(s inboxtype.Scope) func(tx pgx.Tx) {
		return func(tx pgx.Tx) { e.must(e.drv.SetScope(e.ctx, tx, driver.ScopeParams(s)), "SetScope") }
	}
	ensure(nil, tenantA, tenantA, true)
	ensure(nil, global, global, true)
	ensure(set(tenantB), tenantA, tenantB, false)
	ensure(set(tenantA), tenantA, tenantA, false)
	ensure(set(global), tenantA, global, false)
	cleared := func(tx pgx.Tx) {
		set(tenantB)(tx)
		e.must(e.drv.SetScope(e.ctx, tx, driver.NoScope), "SetScope(NoScope)")
	}
	ensured := func(tx pgx.Tx) {
		if _, applied, err := e.drv.EnsureScope(e.ctx, tx, tenantC); err != nil || !applied {
			e.Fatalf("first EnsureScope: applied %v, %v", applied, err)
		}
	}
	ensure(cleared, tenantA, tenantA, true)
	ensure(ensured, tenantA, tenantC, false)

	// The plan in the caller's transaction: one message, a batch, keyed;
	// rolled back, then committed.
	shapes := []func(c string) []*driver.Draft{
		func(c string) []*driver.Draft { return []*driver.Draft{draft(tenantA, c, "one")} },
		func(c string) []*driver.Draft {
			return []*driver.Draft{draft(tenantA, c, "b1"), draft(tenantA, c, "b2")}
		},
		func(c string) []*driver.Draft {
			return []*driver.Draft{keyed(draft(tenantA, c, "k1"), "K"), keyed(draft(tenantA, c, "k2"), "K")}
		},
	}
	for _, commit := range []bool{false, true} {
		for i, shape := range shapes {
			c := fmt.Sprintf("c.%v.%d", commit, i)
			drafts := shape(c)
			tx := e.begin(e.pool)
			_, _, err := e.drv.EnsureScope(e.ctx, tx, tenantA)
			e.must(err, "EnsureScope")
			res, err := e.drv.Accept(e.ctx, &driver.AcceptPlan{Tx: tx, Groups: plan(drafts...)})
			e.must(err, "accept in a transaction")
			for j, o := range e.resolve(drafts, res) {
				e.wantOutcomes([]outcome{o}, []outcome{{"accepted", drafts[j].ID, ""}})
			}
			// The transaction still has its scope, and sees its receipts.
			if tenant, _ := e.txScope(tx); tenant != "tenant-a" {
				e.Fatalf("after the plan the caller's transaction has tenant %q, want tenant-a", tenant)
			}
			var n int
			e.must(tx.QueryRow(e.ctx, "SELECT count(*) FROM pginbox_receipts WHERE scope_id = 'tenant-a' AND consumer = $1", c).Scan(&n), "count")
			if n != len(drafts) {
				e.Fatalf("the caller's transaction sees %d of the %d receipts it accepted", n, len(drafts))
			}
			if !commit {
				e.must(tx.Rollback(e.ctx), "rollback")
				if n := e.count("SELECT count(*) FROM pginbox_receipts WHERE consumer = $1", c); n != 0 {
					e.Fatalf("%d receipts after the caller's rollback, want 0", n)
				}
				if slices.Contains(l.since(), c) {
					e.Fatal("a rolled back plan woke the workers")
				}
				continue
			}
			e.must(tx.Commit(e.ctx), "commit")
			e.checkWake(l, res, drafts, 0, true)
			for _, d := range drafts {
				e.state(d.ID)
			}
		}
	}
}

// Keyed accepts: BLOCKED behind an earlier receipt of the key (consumer,
// scope, key) that still has a work row, unfinished or DEAD; PENDING
// otherwise; numbered in accept order, per key.
func acceptKeyed(e *env) {
	l := e.listen("pginbox_receipt")
	for _, w := range acceptWays {
		c := "c." + w.name
		type want struct {
			d      *driver.Draft
			status string
			seq    int64
		}
		check := func(ws ...want) {
			e.Helper()
			for _, x := range ws {
				s := e.wantStatus(x.d.ID, x.status)
				if s.Seq == nil || *s.Seq != x.seq {
					e.Fatalf("%s: %s: ordering_seq %v, want %d", w.name, x.d.Identity.MessageID, s.Seq, x.seq)
				}
			}
		}
		k1, k2 := keyed(draft(tenantA, c, "k1"), "K"), keyed(draft(tenantA, c, "k2"), "K")
		e.wantOutcomes(e.acceptChecked(w, l, k1), []outcome{{"accepted", k1.ID, "PENDING"}})
		e.wantOutcomes(e.acceptChecked(w, l, k2), []outcome{{"accepted", k2.ID, ""}})
		check(want{k1, "PENDING", 1}, want{k2, "BLOCKED", 2})

		// Another key, another consumer, another scope: each its own order.
		l1 := keyed(draft(tenantA, c, "l1"), "L")
		o1 := keyed(draft(tenantA, c+".other", "k1"), "K")
		b1 := keyed(draft(tenantB, c, "k1"), "K")
		e.acceptChecked(w, l, l1)
		e.acceptChecked(w, l, o1)
		e.acceptChecked(w, l, b1)
		check(want{l1, "PENDING", 1}, want{o1, "PENDING", 1}, want{b1, "PENDING", 1})

		// Redeliveries report the live status and take no number.
		e.wantOutcomes(e.acceptChecked(w, l, again(k2)), []outcome{{"duplicate", k2.ID, "BLOCKED"}})
		e.wantOutcomes(e.acceptChecked(w, l, changed(k1)), []outcome{{"conflict", k1.ID, "PENDING"}})

		// Several keys in one plan, with a plain message.
		k3, k4 := keyed(draft(tenantA, c, "k3"), "K"), keyed(draft(tenantA, c, "k4"), "K")
		m1, m2 := keyed(draft(tenantA, c, "m1"), "M"), keyed(draft(tenantA, c, "m2"), "M")
		p := draft(tenantA, c, "p")
		e.wantOutcomes(e.acceptChecked(w, l, k3, m1, p, k4, m2), []outcome{
			{"accepted", k3.ID, ""}, {"accepted", m1.ID, ""}, {"accepted", p.ID, "PENDING"},
			{"accepted", k4.ID, ""}, {"accepted", m2.ID, ""}})
		check(want{k3, "BLOCKED", 3}, want{k4, "BLOCKED", 4}, want{m1, "PENDING", 1}, want{m2, "BLOCKED", 2})
		if s := e.wantStatus(p.ID, "PENDING"); s.Seq != nil {
			e.Fatalf("%s: an unkeyed receipt got ordering_seq %d", w.name, *s.Seq)
		}

		// A DEAD head still holds its key; a completed one does not.
		d1 := keyed(draft(tenantA, c+".d", "d1"), "D")
		e.acceptChecked(w, l, d1)
		row := e.claimOne(d1.ID)
		if _, err := e.fail(e.pool, row, true, 0); err != nil {
			e.Fatalf("fail: %v", err)
		}
		e.wantStatus(d1.ID, "DEAD")
		d2 := keyed(draft(tenantA, c+".d", "d2"), "D")
		e.acceptChecked(w, l, d2)
		check(want{d2, "BLOCKED", 2})

		f1 := keyed(draft(tenantA, c+".f", "f1"), "F")
		e.acceptChecked(w, l, f1)
		e.complete(f1.ID)
		f2 := keyed(draft(tenantA, c+".f", "f2"), "F")
		e.acceptChecked(w, l, f2)
		check(want{f2, "PENDING", 2})
	}
}

// CommitError marks exactly the failures of a plan's commit step, where the
// plan may have committed unless the server answered: a deferred constraint
// refusing the commit is one in every shape of plan that commits itself,
// and never in a caller's transaction (which the plan does not commit); a
// statement failing inside a transaction is none.
func acceptCommitError(e *env) {
	// Refused only at commit: one message ID per scope.
	e.exec("ALTER TABLE pginbox_receipts ADD CONSTRAINT drivertest_one_message UNIQUE (scope_id, message_id) DEFERRABLE INITIALLY DEFERRED")
	n := 0
	taken := func(s inboxtype.Scope) *driver.Draft {
		n++
		id := fmt.Sprintf("taken-%d", n)
		e.accept(draft(s, "c.first", id))
		return draft(s, consumer, id)
	}
	shapes := []struct {
		name   string
		drafts func() []*driver.Draft
	}{
		{"one", func() []*driver.Draft { return []*driver.Draft{taken(tenantA)} }},
		{"batch", func() []*driver.Draft { return []*driver.Draft{draft(tenantA, consumer, "fresh"), taken(tenantA)} }},
		{"keyed", func() []*driver.Draft { return []*driver.Draft{keyed(taken(tenantA), "K")} }},
		{"scopes", func() []*driver.Draft {
			return []*driver.Draft{draft(tenantB, consumer, "fresh"), taken(tenantA), draft(global, consumer, "fresh")}
		}},
	}
	nothingOf := func(drafts []*driver.Draft) {
		e.Helper()
		for _, d := range drafts {
			if _, ok := e.lookup(d.ID); ok {
				e.Fatalf("a failed plan stored %s", d.Identity)
			}
		}
	}
	for _, sh := range shapes {
		for _, w := range []acceptWay{ownWay, ownScopedWay} {
			drafts := sh.drafts()
			_, err := e.acceptOn(e.pool, w, plan(drafts...), func() bool { return true })
			var ce *driver.CommitError
			if !errors.As(err, &ce) || sqlState(err) == "" {
				e.Fatalf("%s, %s: a commit refused by a deferred constraint: err = %v (%T), want a *driver.CommitError with the server's error", sh.name, w.name, err, err)
			}
			nothingOf(drafts)
		}
		// In a caller's transaction the plan commits nothing: the refusal
		// comes at the caller's commit.
		drafts := sh.drafts()
		tx := e.begin(e.pool)
		groups := plan(drafts...)
		_, _, err := e.drv.EnsureScope(e.ctx, tx, groups[0].Scope)
		e.must(err, "EnsureScope")
		if _, err := e.drv.Accept(e.ctx, &driver.AcceptPlan{Tx: tx, Groups: groups}); err != nil {
			e.Fatalf("%s, caller-tx: a plan that breaks a deferred constraint failed before the caller's commit: %v", sh.name, err)
		}
		if err := tx.Commit(e.ctx); sqlState(err) == "" {
			e.Fatalf("%s, caller-tx: the caller's commit: err = %v, want the server's refusal", sh.name, err)
		}
		nothingOf(drafts)
	}

	// A statement that fails inside a transaction is not a commit's failure.
	bad := func(s inboxtype.Scope, id string) *driver.Draft { return draftWith(s, consumer, id, "not json") }
	for _, c := range []struct {
		way    acceptWay
		drafts []*driver.Draft
	}{
		{ownWay, []*driver.Draft{keyed(bad(tenantA, "bad-k"), "K")}},
		{ownScopedWay, []*driver.Draft{keyed(bad(tenantA, "bad-k"), "K")}},
		{callerTxWay, []*driver.Draft{bad(tenantA, "bad-1")}},
		{callerTxWay, []*driver.Draft{draft(tenantA, consumer, "ok"), bad(tenantA, "bad-2")}},
		{callerTxWay, []*driver.Draft{keyed(bad(tenantA, "bad-k"), "K")}},
		{callerTxWay, []*driver.Draft{draft(tenantB, consumer, "ok"), bad(tenantA, "bad-3")}},
	} {
		_, err := e.acceptOn(e.pool, c.way, plan(c.drafts...), func() bool { return true })
		var ce *driver.CommitError
		if err == nil || errors.As(err, &ce) || sqlState(err) != "22P02" {
			e.Fatalf("%s: a statement failing in a transaction: err = %v (%T), want SQLSTATE 22P02 and no CommitError", c.way.name, err, err)
		}
		nothingOf(c.drafts)
	}
}
