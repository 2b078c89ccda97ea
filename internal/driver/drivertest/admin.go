package drivertest

import (
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/driver"
)

// The operator's transitions and the ordering keys': requeue
// (ReceiptRequeue), replay (ReceiptVersionBump, ReceiptReplay), promote
// (QueuePromotion in the handler's commit), skip (ReceiptSkip, then the
// promotion), purge (PurgeScopes, ReceiptPurge).
var adminCases = []testCase{
	{"Requeue", adminRequeue},
	{"Replay", adminReplay},
	{"Promote", adminPromote},
	{"Skip", adminSkip},
	{"Purge", adminPurge},
}

// adminTx runs fn in a transaction given scope s as an admin view of one
// scope gives it (EnsureScope), and commits it.
func (e *env) adminTx(s inboxtype.Scope, fn func(tx pgx.Tx, q *db.Queries)) {
	e.Helper()
	tx := e.begin(e.pool)
	_, applied, err := e.drv.EnsureScope(e.ctx, tx, s)
	e.must(err, "EnsureScope")
	if !applied {
		e.Fatal("EnsureScope did not apply the scope to a new transaction")
	}
	fn(tx, db.New(tx))
	e.must(tx.Commit(e.ctx), "commit")
}

// lock locks receipt id of scope s for a change (ReceiptGetForUpdate).
func (e *env) lock(q *db.Queries, s inboxtype.Scope, id inboxtype.ID) db.ReceiptGetForUpdateRow {
	e.Helper()
	cur, err := q.ReceiptGetForUpdate(e.ctx, db.ReceiptGetForUpdateParams{ID: id, ScopeKind: string(s.Kind), ScopeID: s.ID})
	e.must(err, "locking the receipt")
	return cur
}

// promote runs the promotion of the next receipts of keys in tx, as Skip
// does, and returns the consumers of the receipts promoted.
func (e *env) promote(tx pgx.Tx, s inboxtype.Scope, consumers, keys []string) []string {
	e.Helper()
	locks := make([]string, len(keys))
	for i := range keys {
		locks[i] = driver.KeyLockName(consumers[i], s, keys[i])
	}
	b := &pgx.Batch{}
	e.drv.QueuePromotion(e.ctx, b, s, consumers, keys, locks)
	br := tx.SendBatch(e.ctx, b)
	defer br.Close()
	for range b.Len() - 1 {
		_, err := br.Exec()
		e.must(err, "the promotion's locks")
	}
	rows, err := br.Query()
	e.must(err, "the promotion")
	woken, err := pgx.CollectRows(rows, pgx.RowTo[string])
	e.must(err, "the promotion")
	e.must(br.Close(), "the promotion")
	return woken
}

// requeue: DEAD or RETRYABLE -> PENDING, due now with a fresh budget, at
// the version the operator saw; a PROCESSING receipt only once its lease
// expired, its claim then fenced out.
func adminRequeue(e *env) {
	l := e.listen("pginbox_receipt")
	dead, retry, live, expired, pending := draft(tenantA, consumer, "dead"), draft(tenantB, consumer, "retry"),
		draft(tenantA, consumer, "live"), draft(tenantA, consumer, "expired"), draft(tenantA, consumer, "pending")
	e.accept(dead, retry, live, expired)
	byID := e.claimAll(dead, retry, live, expired)
	_, err := e.fail(e.pool, byID[dead.ID], true, 0)
	e.must(err, "fail")
	_, err = e.fail(e.pool, byID[retry.ID], false, time.Hour)
	e.must(err, "fail")
	e.exec("UPDATE pginbox_work SET lease_expires_at = now() - interval '1 second' WHERE receipt_id = $1 AND scope_id = 'tenant-a'", expired.ID)
	e.accept(pending)
	l.since()

	requeue := func(d *driver.Draft, ok bool) {
		e.Helper()
		s := d.Identity.Scope
		e.adminTx(s, func(tx pgx.Tx, q *db.Queries) {
			if _, err := q.ReceiptGetForUpdate(e.ctx, db.ReceiptGetForUpdateParams{ID: d.ID, ScopeKind: "tenant", ScopeID: "tenant-c"}); !errors.Is(err, pgx.ErrNoRows) {
				e.Fatalf("locking a receipt in another scope: err = %v, want pgx.ErrNoRows", err)
			}
			cur := e.lock(q, s, d.ID)
			if _, err := q.ReceiptRequeue(e.ctx, db.ReceiptRequeueParams{ScopeID: s.ID, ID: d.ID, ExpectedVersion: cur.Version + 1}); !errors.Is(err, pgx.ErrNoRows) {
				e.Fatalf("requeue at another version: err = %v, want pgx.ErrNoRows", err)
			}
			row, err := q.ReceiptRequeue(e.ctx, db.ReceiptRequeueParams{ScopeID: s.ID, ID: d.ID, ExpectedVersion: cur.Version})
			if !ok {
				if !errors.Is(err, pgx.ErrNoRows) {
					e.Fatalf("requeue of a %s receipt: err = %v, want pgx.ErrNoRows", cur.Status, err)
				}
				return
			}
			e.must(err, "requeue")
			if row.Version != cur.Version+1 || row.Consumer != consumer {
				e.Fatalf("requeue returned %+v from version %d", row, cur.Version)
			}
			e.must(q.ReceiptNotify(e.ctx, []string{row.Consumer}), "ReceiptNotify")
		})
		s2 := e.state(d.ID)
		if ok && (s2.Status != "PENDING" || s2.ReceiptStatus != "PENDING" || !s2.Due || s2.Attempts != 0 || s2.Token != "") {
			e.Fatalf("requeued receipt stored as %+v", s2)
		}
		if ok && !slices.Contains(l.since(), consumer) {
			e.Fatal("the requeue's wake-up did not reach the workers at its commit")
		}
	}
	requeue(live, false)
	requeue(pending, false)
	requeue(dead, true)
	requeue(retry, true)
	requeue(expired, true)
	e.wantStatus(live.ID, "PROCESSING")

	old := byID[expired.ID]
	h := e.start(e.pool, tenantA, old)
	if len(h.rows) != 0 {
		e.Fatal("ReceiptStart with the token of a requeued claim completed it")
	}
	h.rollback()
	e.claimAll(dead, retry, expired, pending)
}

// replay: COMPLETED -> a new PENDING receipt with the original's identity
// and content, linked to it, at the version the operator saw; the original
// stays COMPLETED and keeps the identity; a keyed copy goes to the back of
// its key.
func adminReplay(e *env) {
	o := draft(tenantA, consumer, "o")
	e.accept(o)
	e.complete(o.ID)
	v := e.state(o.ID).Version
	newID := inboxtype.New()
	scopeOf.Store(newID, "tenant-a")
	e.adminTx(tenantA, func(tx pgx.Tx, q *db.Queries) {
		cur := e.lock(q, tenantA, o.ID)
		if cur.Status != "COMPLETED" || cur.Version != v {
			e.Fatalf("locked %+v, want COMPLETED at version %d", cur, v)
		}
		if _, err := q.ReceiptVersionBump(e.ctx, db.ReceiptVersionBumpParams{ScopeID: "tenant-a", ID: o.ID, ExpectedVersion: v + 1}); !errors.Is(err, pgx.ErrNoRows) {
			e.Fatalf("version bump at another version: err = %v, want pgx.ErrNoRows", err)
		}
		nv, err := q.ReceiptVersionBump(e.ctx, db.ReceiptVersionBumpParams{ScopeID: "tenant-a", ID: o.ID, ExpectedVersion: v})
		e.must(err, "version bump")
		if nv != v+1 {
			e.Fatalf("version bump to %d from %d", nv, v)
		}
		n, err := q.ReceiptReplay(e.ctx, db.ReceiptReplayParams{NewID: newID, ScopeID: "tenant-a", OriginalID: o.ID})
		e.must(err, "replay")
		m, err := q.ReceiptReplayQueue(e.ctx, db.ReceiptReplayQueueParams{ScopeID: "tenant-a", ID: newID})
		e.must(err, "replay's queue row")
		if n != 1 || m != 1 {
			e.Fatalf("replay inserted %d receipts and %d work rows, want 1 and 1", n, m)
		}
	})
	if s := e.state(o.ID); s.Status != "COMPLETED" || s.Version != v+1 {
		e.Fatalf("replayed original stored as %+v", s)
	}
	s := e.state(newID)
	if s.Status != "PENDING" || !s.Due || s.ReplayOf != o.ID.UUIDString() || s.Payload == nil || *s.Payload != o.Payload || s.ScopeID != "tenant-a" {
		e.Fatalf("replay stored as %+v", s)
	}
	// A stale replay is refused; a redelivery is still the original's.
	e.adminTx(tenantA, func(tx pgx.Tx, q *db.Queries) {
		e.lock(q, tenantA, o.ID)
		if _, err := q.ReceiptVersionBump(e.ctx, db.ReceiptVersionBumpParams{ScopeID: "tenant-a", ID: o.ID, ExpectedVersion: v}); !errors.Is(err, pgx.ErrNoRows) {
			e.Fatalf("a second replay at the version the first saw: err = %v, want pgx.ErrNoRows", err)
		}
	})
	dup := again(o)
	e.wantOutcomes(e.resolve([]*driver.Draft{dup}, e.accept(dup)), []outcome{{"duplicate", o.ID, "COMPLETED"}})
	row := e.claimOne(newID)
	h := e.start(e.pool, tenantA, row)
	if len(h.rows) != 1 || *h.rows[0].Payload != o.Payload {
		e.Fatalf("the replay's handler got %+v", h.rows)
	}
	h.commit(true)

	// Keyed: the copy is numbered after the key's last receipt, BLOCKED
	// while the key has a work row.
	k1, k2 := keyed(draft(tenantA, "c.keyed", "k1"), "K"), keyed(draft(tenantA, "c.keyed", "k2"), "K")
	e.accept(k1, k2)
	e.complete(k1.ID)
	e.wantStatus(k2.ID, "PENDING")
	copyID := inboxtype.New()
	scopeOf.Store(copyID, "tenant-a")
	e.adminTx(tenantA, func(tx pgx.Tx, q *db.Queries) {
		cur := e.lock(q, tenantA, k1.ID)
		_, err := q.ReceiptVersionBump(e.ctx, db.ReceiptVersionBumpParams{ScopeID: "tenant-a", ID: k1.ID, ExpectedVersion: cur.Version})
		e.must(err, "version bump")
		lock := driver.KeyLockName("c.keyed", tenantA, "K")
		e.must(q.ReceiptKeyLock(e.ctx, db.ReceiptKeyLockParams{Keys: []string{lock}, ScopeID: "tenant-a"}), "ReceiptKeyLock")
		n, err := q.ReceiptReplay(e.ctx, db.ReceiptReplayParams{NewID: copyID, ScopeID: "tenant-a", OriginalID: k1.ID})
		e.must(err, "replay")
		m, err := q.ReceiptQueueKeyed(e.ctx, db.ReceiptQueueKeyedParams{ScopeID: "tenant-a", ID: copyID})
		e.must(err, "replay's queue row")
		if n != 1 || m != 1 {
			e.Fatalf("keyed replay inserted %d receipts and %d work rows", n, m)
		}
	})
	if s := e.wantStatus(copyID, "BLOCKED"); s.Seq == nil || *s.Seq != 3 {
		e.Fatalf("keyed replay numbered %v, want 3", s.Seq)
	}
}

// promote: the handler transaction that completes a key's head makes the
// key's next receipt PENDING in its commit (QueuePromotion); without it, or
// rolled back, the next one stays BLOCKED; a head still there (running or
// DEAD) holds its key.
func adminPromote(e *env) {
	k1, k2, k3 := keyed(draft(tenantA, consumer, "k1"), "K"), keyed(draft(tenantA, consumer, "k2"), "K"), keyed(draft(tenantA, consumer, "k3"), "K")
	e.accept(k1, k2, k3)
	c := e.claimer(lease)
	rows, _ := e.claim(c, 16, 16)
	e.wantClaimed("a key of three", rows, k1.ID)
	h := e.start(e.pool, tenantA, rows...)
	if len(h.rows) != 1 || h.rows[0].OrderingKey == nil || *h.rows[0].OrderingKey != "K" {
		e.Fatalf("ReceiptStart of a keyed receipt returned %+v", h.rows)
	}
	if woken := h.commit(true); !slices.Equal(woken, []string{consumer}) {
		e.Fatalf("the promotion returned %v, want [%s]", woken, consumer)
	}
	e.wantStatus(k1.ID, "COMPLETED")
	if s := e.wantStatus(k2.ID, "PENDING"); !s.Due {
		e.Fatal("the promoted receipt is not due")
	}
	e.wantStatus(k3.ID, "BLOCKED")
	rows, _ = e.claim(c, 16, 16)
	e.wantClaimed("after the promotion", rows, k2.ID)
	h = e.start(e.pool, tenantA, rows...)
	h.rollback()
	e.wantStatus(k3.ID, "BLOCKED")
	h = e.start(e.pool, tenantA, rows...)
	h.commit(true)
	e.wantStatus(k3.ID, "PENDING")

	// Without the promotion the next receipt stays BLOCKED; the promotion
	// in a transaction of its own (as Skip runs it) then promotes it.
	l1, l2 := keyed(draft(tenantB, consumer, "l1"), "L"), keyed(draft(tenantB, consumer, "l2"), "L")
	e.accept(l1, l2)
	e.exec("UPDATE pginbox_work SET available_at = now() + interval '1 day' WHERE receipt_id = $1 AND scope_id = 'tenant-a'", k3.ID)
	row := e.claimOne(l1.ID)
	h = e.start(e.pool, tenantB, row)
	h.commit(false)
	e.wantStatus(l2.ID, "BLOCKED")
	e.adminTx(tenantB, func(tx pgx.Tx, q *db.Queries) {
		if woken := e.promote(tx, tenantB, []string{consumer}, []string{"L"}); len(woken) != 1 {
			e.Fatalf("promotion returned %v", woken)
		}
	})
	e.wantStatus(l2.ID, "PENDING")

	// A head still there holds its key: running, then DEAD.
	m1, m2 := keyed(draft(tenantC, "c.m", "m1"), "M"), keyed(draft(tenantC, "c.m", "m2"), "M")
	e.accept(m1, m2)
	mrow := e.claimOne(m1.ID)
	for _, st := range []string{"PROCESSING", "DEAD"} {
		e.wantStatus(m1.ID, st)
		e.adminTx(tenantC, func(tx pgx.Tx, q *db.Queries) {
			if woken := e.promote(tx, tenantC, []string{"c.m"}, []string{"M"}); len(woken) != 0 {
				e.Fatalf("promotion behind a %s head returned %v", st, woken)
			}
		})
		e.wantStatus(m2.ID, "BLOCKED")
		if st == "PROCESSING" {
			_, err := e.fail(e.pool, mrow, true, 0)
			e.must(err, "fail")
		}
	}

	// Several keys of two consumers in one handler transaction.
	n1, n2 := keyed(draft(global, "c.n", "n1"), "N"), keyed(draft(global, "c.n", "n2"), "N")
	o1, o2 := keyed(draft(global, "c.o", "o1"), "N"), keyed(draft(global, "c.o", "o2"), "N")
	e.accept(n1, n2, o1, o2)
	rows, _ = e.claim(e.claimer(lease, "c.n", "c.o"), 16, 16)
	e.wantClaimed("two keys", rows, n1.ID, o1.ID)
	h = e.start(e.pool, global, rows...)
	woken := h.commit(true)
	slices.Sort(woken)
	if !slices.Equal(woken, []string{"c.n", "c.o"}) {
		e.Fatalf("the promotion of two keys returned %v", woken)
	}
	e.wantStatus(n2.ID, "PENDING")
	e.wantStatus(o2.ID, "PENDING")
}

// skip: a DEAD head leaves its key's order (at the version the operator
// saw) and the key's next receipt is promoted in the same transaction.
func adminSkip(e *env) {
	s1, s2 := keyed(draft(tenantA, consumer, "s1"), "S"), keyed(draft(tenantA, consumer, "s2"), "S")
	e.accept(s1, s2)
	row := e.claimOne(s1.ID)
	// Not DEAD yet: nothing to skip.
	e.adminTx(tenantA, func(tx pgx.Tx, q *db.Queries) {
		cur := e.lock(q, tenantA, s1.ID)
		if _, err := q.ReceiptSkip(e.ctx, db.ReceiptSkipParams{ScopeID: "tenant-a", ID: s1.ID, ExpectedVersion: cur.Version}); !errors.Is(err, pgx.ErrNoRows) {
			e.Fatalf("skip of a PROCESSING receipt: err = %v, want pgx.ErrNoRows", err)
		}
	})
	_, err := e.fail(e.pool, row, true, 0)
	e.must(err, "fail")
	e.adminTx(tenantA, func(tx pgx.Tx, q *db.Queries) {
		cur := e.lock(q, tenantA, s1.ID)
		if _, err := q.ReceiptSkip(e.ctx, db.ReceiptSkipParams{ScopeID: "tenant-a", ID: s1.ID, ExpectedVersion: cur.Version - 1}); !errors.Is(err, pgx.ErrNoRows) {
			e.Fatalf("skip at another version: err = %v, want pgx.ErrNoRows", err)
		}
		got, err := q.ReceiptSkip(e.ctx, db.ReceiptSkipParams{ScopeID: "tenant-a", ID: s1.ID, ExpectedVersion: cur.Version})
		e.must(err, "skip")
		if got.Version != cur.Version+1 || got.Consumer != consumer || got.OrderingKey != "S" {
			e.Fatalf("skip returned %+v", got)
		}
		if woken := e.promote(tx, tenantA, []string{got.Consumer}, []string{got.OrderingKey}); !slices.Equal(woken, []string{consumer}) {
			e.Fatalf("the skip's promotion returned %v", woken)
		}
	})
	e.wantStatus(s1.ID, "DEAD")
	e.wantStatus(s2.ID, "PENDING")
	if n := e.count("SELECT count(*) FROM pginbox_work WHERE receipt_id = $1 AND ordering_key IS NULL", s1.ID); n != 1 {
		e.Fatal("the skipped receipt's work row kept its key")
	}
	e.adminTx(tenantA, func(tx pgx.Tx, q *db.Queries) {
		cur := e.lock(q, tenantA, s1.ID)
		if _, err := q.ReceiptSkip(e.ctx, db.ReceiptSkipParams{ScopeID: "tenant-a", ID: s1.ID, ExpectedVersion: cur.Version}); !errors.Is(err, pgx.ErrNoRows) {
			e.Fatalf("a second skip: err = %v, want pgx.ErrNoRows", err)
		}
	})
	e.claimOne(s2.ID)
}

// purge: an operator's purge of every scope drops the payloads of the
// receipts completed before the cutoff, whichever way the driver has it
// run (one statement across scopes, or scope by scope); a purge of one
// scope, the scope's alone.
func adminPurge(e *env) {
	old := []*driver.Draft{draft(tenantA, consumer, "a"), draft(tenantB, consumer, "b"), draft(global, consumer, "g"),
		draft(tenantA, consumer, "a2"), draft(tenantC, consumer, "c")}
	recent, pending := draft(tenantA, consumer, "recent"), draft(tenantB, consumer, "pending")
	e.accept(append(old, recent)...)
	claimed := e.claimAll(append(old, recent)...)
	for _, s := range []inboxtype.Scope{tenantA, tenantB, tenantC, global} {
		var mine []db.ReceiptClaimScopeRow
		for _, r := range claimed {
			if r.ScopeID == s.ID {
				mine = append(mine, r)
			}
		}
		e.start(e.pool, s, mine...).commit(false)
	}
	e.accept(pending)
	for _, d := range old {
		e.exec(`UPDATE pginbox_receipts SET created_at = now() - interval '3 hours', completed_at = now() - interval '2 hours'
			WHERE id = $1 AND scope_id = $2`, d.ID, d.Identity.Scope.ID)
	}
	var cutoff time.Time
	e.must(e.pool.QueryRow(e.ctx, "SELECT now() - interval '1 hour'").Scan(&cutoff), "reading the cutoff")
	purge := func(q *db.Queries, all bool, s db.ReceiptPurgeScopesRow) int64 {
		e.Helper()
		var total int64
		for {
			n, err := q.ReceiptPurge(e.ctx, db.ReceiptPurgeParams{Cutoff: cutoff, AllScopes: all, ScopeKind: s.ScopeKind, ScopeID: s.ScopeID, MaxCount: 1})
			e.must(err, "purge")
			total += n
			if n < 1 {
				return total
			}
		}
	}
	purged := func(d *driver.Draft) bool {
		s := e.state(d.ID)
		return s.Payload == nil
	}

	// One scope, with its scope applied as an admin view of it does.
	if n := purge(db.New(e.drv.Scoped(e.pool, tenantC)), false, db.ReceiptPurgeScopesRow{ScopeKind: "tenant", ScopeID: "tenant-c"}); n != 1 {
		e.Fatalf("a purge of one scope purged %d receipts, want 1", n)
	}
	for _, d := range old {
		if purged(d) != (d.Identity.Scope == tenantC) {
			e.Fatalf("after a purge of tenant-c, %s purged: %v", d.Identity, purged(d))
		}
	}

	// Every scope.
	scopes, all, err := e.drv.PurgeScopes(e.ctx, e.pool, cutoff)
	e.must(err, "PurgeScopes")
	if all {
		if len(scopes) != 1 {
			e.Fatalf("PurgeScopes: all with %d entries, want 1", len(scopes))
		}
	} else {
		want := []db.ReceiptPurgeScopesRow{{ScopeKind: "global"}, {ScopeKind: "tenant", ScopeID: "tenant-a"}, {ScopeKind: "tenant", ScopeID: "tenant-b"}}
		if !slices.Equal(scopes, want) {
			e.Fatalf("PurgeScopes listed %v, want the scopes with receipts to purge: %v", scopes, want)
		}
	}
	var total int64
	for _, s := range scopes {
		total += purge(db.New(e.pool), all, s)
	}
	if total != 4 {
		e.Fatalf("the purge of every scope purged %d receipts, want 4", total)
	}
	for _, d := range old {
		s := e.state(d.ID)
		if s.Payload != nil || s.Status != "COMPLETED" {
			e.Fatalf("%s after the purge: %+v", d.Identity, s)
		}
	}
	for _, d := range []*driver.Draft{recent, pending} {
		if purged(d) {
			e.Fatalf("the purge dropped the payload of %s", d.Identity)
		}
	}
	if n := e.count("SELECT count(*) FROM pginbox_receipts WHERE payload IS NULL AND payload_purged_at IS NOT NULL"); n != 5 {
		e.Fatalf("%d receipts marked purged, want 5", n)
	}
	// Nothing left to purge; a redelivery of a purged receipt is still its
	// duplicate.
	scopes, all, err = e.drv.PurgeScopes(e.ctx, e.pool, cutoff)
	e.must(err, "PurgeScopes")
	if !all && len(scopes) != 0 {
		e.Fatalf("PurgeScopes after the purge listed %v", scopes)
	}
	dup := again(old[0])
	e.wantOutcomes(e.resolve([]*driver.Draft{dup}, e.accept(dup)), []outcome{{"duplicate", old[0].ID, "COMPLETED"}})
}
