package drivertest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/driver"
)

// The outbox: emit (Outbox.Insert), claim (RelayClaimer), mark, fail and
// release (Settle), recover (Recover), purge (Purge).
var outboxCases = []testCase{
	{"Insert", outboxInsert},
	{"KeyLock", outboxKeyLock},
	{"ClaimKeyOrder", outboxClaimKeyOrder},
	{"ClaimScopes", outboxClaimScopes},
	{"Settle", outboxSettle},
	{"Recover", outboxRecover},
	{"Purge", outboxPurge},
}

// eventParams is a new event with ordering key key ("" for none).
func eventParams(key string) db.OutboxEventInsertParams {
	id := inboxtype.New()
	return db.OutboxEventInsertParams{
		ID: id, Source: "drivertest", Destination: "drivertest.dest", OrderingKey: key,
		EventType: "drivertest.event", SchemaVersion: 1, Payload: `{"event":"` + id.String() + `"}`, Metadata: `{}`,
	}
}

// emit inserts an event with key key in a transaction of scope s, as Emit
// does, and commits it.
func (e *env) emit(s inboxtype.Scope, key string) inboxtype.ID {
	e.Helper()
	p := eventParams(key)
	tx := e.begin(e.pool)
	e.must(e.drv.SetScope(e.ctx, tx, driver.ScopeParams(s)), "SetScope")
	e.must(e.drv.Outbox().Insert(e.ctx, db.New(tx), p), "Insert")
	e.must(db.New(tx).OutboxNotify(e.ctx), "OutboxNotify")
	e.must(tx.Commit(e.ctx), "commit")
	scopeOf.Store(p.ID, s.ID)
	return p.ID
}

// event is an outbox event's stored state.
type event struct {
	Status    string
	Attempts  int32
	Token     string
	LeaseLive bool
	Due       bool
	Seq       int64
	ScopeKind string
	ScopeID   string
	ReceiptID string
	Published bool
	Key       string
}

func (e *env) event(id inboxtype.ID) event {
	e.Helper()
	var ev event
	where, args := "id = $1", []any{id}
	if sid, ok := scopeOf.Load(id); ok {
		where, args = "id = $1 AND scope_id = $2", []any{id, sid}
	}
	err := e.pool.QueryRow(e.ctx, `
		SELECT status, attempts, coalesce(claim_token::text, ''), coalesce(lease_expires_at > now(), false),
			available_at <= now(), seq, scope_kind, scope_id, coalesce(receipt_id::text, ''), published_at IS NOT NULL, ordering_key
		FROM pginbox_outbox WHERE `+where, args...).Scan(&ev.Status, &ev.Attempts, &ev.Token, &ev.LeaseLive, &ev.Due,
		&ev.Seq, &ev.ScopeKind, &ev.ScopeID, &ev.ReceiptID, &ev.Published, &ev.Key)
	e.must(err, "reading event "+id.String())
	return ev
}

// relay returns a relay's claimer.
func (e *env) relay() driver.RelayClaimer {
	return e.drv.Outbox().NewClaimer(driver.RelayClaimerConfig{Lease: lease})
}

// claimEvents runs one claim of n and fails the case on an error.
func (e *env) claimEvents(c driver.RelayClaimer, n int) []db.OutboxClaimRow {
	e.Helper()
	rows, err := c.Claim(e.ctx, e.pool, n)
	e.must(err, "outbox claim")
	return rows
}

// wantEvents fails the case unless rows are exactly want, in any order.
func (e *env) wantEvents(what string, rows []db.OutboxClaimRow, want ...inboxtype.ID) {
	e.Helper()
	got := make([]inboxtype.ID, len(rows))
	for i, r := range rows {
		got[i] = r.ID
	}
	slices.SortFunc(got, compareIDs)
	want = slices.Clone(want)
	slices.SortFunc(want, compareIDs)
	if !slices.Equal(got, want) {
		e.Fatalf("%s: claimed %v, want %v", what, got, want)
	}
}

// fences are the fences of rows.
func fences(rows []db.OutboxClaimRow) []driver.Fence {
	out := make([]driver.Fence, len(rows))
	for i, r := range rows {
		out[i] = driver.Fence{ID: r.ID.UUIDString(), Token: r.ClaimToken.UUIDString(), ScopeID: r.ScopeID}
	}
	return out
}

// publish marks rows published and fails the case unless all were marked.
func (e *env) publish(rows []db.OutboxClaimRow) {
	e.Helper()
	res, err := e.drv.Outbox().Settle(e.ctx, e.pool, driver.Settlement{Published: fences(rows), MaxAttempts: 5})
	e.must(err, "mark published")
	if res.Marked != len(rows) || res.Lost != 0 {
		e.Fatalf("marking %d events: marked %d, lost %d", len(rows), res.Marked, res.Lost)
	}
}

// emit: the event is stored PENDING in its transaction's scope, linked to
// the receipt that emitted it when that receipt is of the same scope; an ID
// stored already inserts nothing (pgx.ErrNoRows) and leaves the
// transaction usable; a rollback stores nothing.
func outboxInsert(e *env) {
	a, g := e.emit(tenantA, ""), e.emit(global, "")
	k1, k2 := e.emit(tenantA, "K"), e.emit(tenantA, "K")
	for _, c := range []struct {
		id   inboxtype.ID
		kind string
		sid  string
	}{{a, "tenant", "tenant-a"}, {g, "global", ""}, {k1, "tenant", "tenant-a"}} {
		ev := e.event(c.id)
		if ev.Status != "PENDING" || ev.Attempts != 0 || !ev.Due || ev.Token != "" || ev.ScopeKind != c.kind || ev.ScopeID != c.sid || ev.ReceiptID != "" {
			e.Fatalf("emitted event stored as %+v, want PENDING in %s/%q", ev, c.kind, c.sid)
		}
	}
	if s1, s2 := e.event(k1).Seq, e.event(k2).Seq; s1 >= s2 {
		e.Fatalf("a key's events numbered %d then %d", s1, s2)
	}
	if n := e.count("SELECT count(*) FROM pginbox_outbox WHERE id = $1 AND payload::text = $2 AND destination = 'drivertest.dest'", a, `{"event":"`+a.String()+`"}`); n != 1 {
		e.Fatal("the event's payload or destination is not the one emitted")
	}

	// The emitting receipt's link.
	r := draft(tenantA, consumer, "r")
	e.accept(r)
	linked, unlinked := eventParams(""), eventParams("")
	linked.ReceiptID, linked.ReceiptTenant = r.ID, "tenant-a"
	unlinked.ReceiptID, unlinked.ReceiptTenant = r.ID, "tenant-b"
	tx := e.begin(e.pool)
	e.must(e.drv.SetScope(e.ctx, tx, driver.ScopeParams(tenantA)), "SetScope")
	e.must(e.drv.Outbox().Insert(e.ctx, db.New(tx), linked), "Insert")
	e.must(e.drv.Outbox().Insert(e.ctx, db.New(tx), unlinked), "Insert")
	// A repeated ID: nothing, and the transaction goes on.
	if err := e.drv.Outbox().Insert(e.ctx, db.New(tx), linked); !errors.Is(err, pgx.ErrNoRows) {
		e.Fatalf("a repeated event ID: err = %v, want pgx.ErrNoRows", err)
	}
	after := eventParams("K")
	e.must(e.drv.Outbox().Insert(e.ctx, db.New(tx), after), "Insert after a repeated ID")
	e.must(tx.Commit(e.ctx), "commit")
	if ev := e.event(linked.ID); ev.ReceiptID != r.ID.UUIDString() {
		e.Fatalf("an event emitted in its receipt's scope is linked to %q, want %s", ev.ReceiptID, r.ID.UUIDString())
	}
	if ev := e.event(unlinked.ID); ev.ReceiptID != "" {
		e.Fatalf("an event whose receipt is of another scope is linked to %q", ev.ReceiptID)
	}
	if s := e.event(after.ID).Seq; s <= e.event(k2).Seq {
		e.Fatal("a later event of the key was numbered before an earlier one")
	}

	tx = e.begin(e.pool)
	e.must(e.drv.SetScope(e.ctx, tx, driver.ScopeParams(tenantB)), "SetScope")
	gone := eventParams("")
	e.must(e.drv.Outbox().Insert(e.ctx, db.New(tx), gone), "Insert")
	e.must(tx.Rollback(e.ctx), "rollback")
	if n := e.count("SELECT count(*) FROM pginbox_outbox WHERE id = $1", gone.ID); n != 0 {
		e.Fatal("a rolled back emit stored its event")
	}
	if n := e.count("SELECT count(*) FROM pginbox_outbox"); n != 7 {
		e.Fatalf("%d events stored, want 7", n)
	}
}

// claim: an event with an ordering key is claimed only with every earlier
// unpublished one of its key (in its scope), so at most one batch of a key
// is in flight, in order; a retried event holds its key's later ones back.
func outboxClaimKeyOrder(e *env) {
	e1, e2, e3 := e.emit(tenantA, "K"), e.emit(tenantA, "K"), e.emit(tenantA, "K")
	u1, f1 := e.emit(tenantA, ""), e.emit(tenantA, "L")
	c := e.relay()
	rows := e.claimEvents(c, 2)
	e.wantEvents("a claim of 2", rows, e1, e2)
	for _, r := range rows {
		ev := e.event(r.ID)
		if ev.Status != "PUBLISHING" || ev.Token != r.ClaimToken.UUIDString() || !ev.LeaseLive || ev.Attempts != 1 || r.Attempts != 1 ||
			r.ScopeKind != "tenant" || r.ScopeID != "tenant-a" || r.OrderingKey != "K" || r.Destination != "drivertest.dest" ||
			r.Payload != `{"event":"`+r.ID.String()+`"}` || r.Seq != ev.Seq {
			e.Fatalf("claimed event: row %+v, stored %+v", r, ev)
		}
	}
	first := rows
	e.wantEvents("with the key in flight", e.claimEvents(c, 10), u1, f1)
	e.wantEvents("nothing due", e.claimEvents(c, 10))
	e.publish(first[:1])
	e.wantEvents("an earlier event of the key still in flight", e.claimEvents(c, 10))
	e.publish(first[1:])
	e.wantEvents("the key's earlier events published", e.claimEvents(c, 10), e3)

	// A retry holds its key.
	g1, g2, g3 := e.emit(tenantA, "G"), e.emit(tenantA, "G"), e.emit(tenantA, "G")
	rows = e.claimEvents(c, 10)
	e.wantEvents("a key of three", rows, g1, g2, g3)
	byID := map[inboxtype.ID]db.OutboxClaimRow{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	fs := fences([]db.OutboxClaimRow{byID[g1]})
	_, err := e.drv.Outbox().Settle(e.ctx, e.pool, driver.Settlement{
		Failed:   []driver.EventFailure{{Fence: fs[0], Error: "drivertest", Delay: time.Hour}},
		Released: fences([]db.OutboxClaimRow{byID[g2], byID[g3]}), MaxAttempts: 5,
	})
	e.must(err, "settle")
	e.wantEvents("behind a retry", e.claimEvents(c, 10))
	e.exec("UPDATE pginbox_outbox SET available_at = now() - interval '1 second' WHERE id = $1 AND scope_id = 'tenant-a'", g1)
	rows = e.claimEvents(c, 1)
	e.wantEvents("a claim of 1 once the retry is due", rows, g1)
	e.wantEvents("the retry in flight", e.claimEvents(c, 10))
	e.publish(rows)
	e.wantEvents("the retry published", e.claimEvents(c, 10), g2, g3)
}

// Claims over several scopes: whatever a claim takes, every event's
// earlier unpublished events of its key come with it, each event is
// claimed once, and a key's events are claimed in their order.
func outboxClaimScopes(e *env) {
	var all []inboxtype.ID
	for i := range 4 {
		for _, s := range []inboxtype.Scope{tenantA, tenantB, global} {
			all = append(all, e.emit(s, "K-"+s.ID), e.emit(s, ""))
		}
		all = append(all, e.emit(tenantC, fmt.Sprint("solo-", i)))
	}
	c := e.relay()
	claimed := map[inboxtype.ID]bool{}
	lastSeq := map[string]int64{} // per scope and key
	for n := 1; ; n = n%4 + 1 {
		rows := e.claimEvents(c, n)
		if len(rows) > n {
			e.Fatalf("a claim of %d took %d events", n, len(rows))
		}
		if len(rows) == 0 {
			break
		}
		in := map[string]bool{}
		for _, r := range rows {
			if claimed[r.ID] {
				e.Fatalf("event %s claimed twice", r.ID)
			}
			claimed[r.ID] = true
			in[r.ID.UUIDString()] = true
		}
		slices.SortFunc(rows, func(a, b db.OutboxClaimRow) int { return int(a.Seq - b.Seq) })
		for _, r := range rows {
			if r.OrderingKey == "" {
				continue
			}
			k := r.ScopeID + "/" + r.OrderingKey
			if r.Seq <= lastSeq[k] {
				e.Fatalf("key %s: event %d claimed after %d", k, r.Seq, lastSeq[k])
			}
			lastSeq[k] = r.Seq
			var waiting []string
			rs, err := e.pool.Query(e.ctx, `SELECT id::text FROM pginbox_outbox
				WHERE scope_id = $1 AND ordering_key = $2 AND seq < $3 AND status IN ('PENDING', 'PUBLISHING')`, r.ScopeID, r.OrderingKey, r.Seq)
			e.must(err, "reading the key's earlier events")
			waiting, err = pgx.CollectRows(rs, pgx.RowTo[string])
			e.must(err, "reading the key's earlier events")
			for _, id := range waiting {
				if !in[id] {
					e.Fatalf("event %d of key %s claimed while its earlier event %s is unpublished and not in the claim", r.Seq, k, id)
				}
			}
		}
		e.publish(rows)
	}
	if len(claimed) != len(all) {
		e.Fatalf("claimed %d events of %d", len(claimed), len(all))
	}
}

// mark, fail, release: each fenced by the claim's token. Marked events are
// PUBLISHED; failed ones PENDING after their delay, or DEAD when permanent
// or their attempts are spent; released ones PENDING with the attempt
// given back; a wrong or spent token changes nothing and is reported lost.
func outboxSettle(e *env) {
	x1, x2, x3, x4 := e.emit(tenantA, ""), e.emit(tenantA, ""), e.emit(tenantA, ""), e.emit(tenantA, "")
	y1, z1 := e.emit(tenantB, ""), e.emit(global, "")
	c := e.relay()
	rows := e.claimEvents(c, 10)
	e.wantEvents("every event", rows, x1, x2, x3, x4, y1, z1)
	by := map[inboxtype.ID]driver.Fence{}
	for i, f := range fences(rows) {
		by[rows[i].ID] = f
	}
	wrong := by[x2]
	wrong.Token = inboxtype.New().UUIDString()
	res, err := e.drv.Outbox().Settle(e.ctx, e.pool, driver.Settlement{
		Published: []driver.Fence{by[x1], wrong},
		Failed: []driver.EventFailure{
			{Fence: by[x3], Error: "retry later", Delay: time.Hour},
			{Fence: by[y1], Error: "permanent", Dead: true},
		},
		Released:    []driver.Fence{by[x4], by[z1]},
		MaxAttempts: 5,
	})
	e.must(err, "settle")
	if res.Marked != 1 || res.Lost != 1 || len(res.Failed) != 2 {
		e.Fatalf("settle: %+v, want 1 marked, 1 lost, 2 failures", res)
	}
	for _, f := range res.Failed {
		switch {
		case f.ID == x3 && f.Status == "PENDING" && f.AvailableAt.After(time.Now().Add(50*time.Minute)):
		case f.ID == y1 && f.Status == "DEAD":
		default:
			e.Fatalf("failure recorded as %+v", f)
		}
	}
	if ev := e.event(x1); ev.Status != "PUBLISHED" || !ev.Published || ev.Token != "" {
		e.Fatalf("marked event stored as %+v", ev)
	}
	if ev := e.event(x2); ev.Status != "PUBLISHING" || ev.Token != by[x2].Token {
		e.Fatalf("an event marked with a wrong token changed: %+v", ev)
	}
	if ev := e.event(x3); ev.Status != "PENDING" || ev.Due || ev.Attempts != 1 || ev.Token != "" {
		e.Fatalf("failed event stored as %+v", ev)
	}
	if ev := e.event(y1); ev.Status != "DEAD" || ev.Token != "" {
		e.Fatalf("permanently failed event stored as %+v", ev)
	}
	if ev := e.event(x4); ev.Status != "PENDING" || !ev.Due || ev.Attempts != 0 || ev.Token != "" {
		e.Fatalf("released event stored as %+v", ev)
	}
	// Spent tokens.
	res, err = e.drv.Outbox().Settle(e.ctx, e.pool, driver.Settlement{
		Published: []driver.Fence{by[x1], by[x4]},
		Failed:    []driver.EventFailure{{Fence: by[x3], Error: "again"}},
		Released:  []driver.Fence{by[y1]}, MaxAttempts: 5,
	})
	e.must(err, "settle")
	if res.Marked != 0 || res.Lost != 2 || len(res.Failed) != 0 {
		e.Fatalf("settle with spent tokens: %+v, want nothing marked, 2 lost, no failure", res)
	}
	if ev := e.event(x4); ev.Status != "PENDING" {
		e.Fatalf("a released event marked with its old token: %+v", ev)
	}

	// Attempts spent: the second failure of two is DEAD.
	for attempt := 1; attempt <= 2; attempt++ {
		rows := e.claimEvents(c, 10)
		var zr []db.OutboxClaimRow
		for _, r := range rows {
			if r.ID == z1 {
				zr = append(zr, r)
			}
		}
		if len(zr) != 1 {
			e.Fatalf("attempt %d: z1 not claimed (%d rows)", attempt, len(rows))
		}
		res, err := e.drv.Outbox().Settle(e.ctx, e.pool, driver.Settlement{
			Failed: []driver.EventFailure{{Fence: fences(zr)[0], Error: "failed"}}, MaxAttempts: 2,
		})
		e.must(err, "settle")
		want := "PENDING"
		if attempt == 2 {
			want = "DEAD"
		}
		if len(res.Failed) != 1 || res.Failed[0].Status != want {
			e.Fatalf("failure %d of 2 attempts: %+v, want %s", attempt, res.Failed, want)
		}
		if ev := e.event(z1); ev.Status != want || ev.Attempts != int32(attempt) {
			e.Fatalf("failure %d of 2 attempts stored as %+v", attempt, ev)
		}
		if attempt == 1 {
			// The other events claimed with it go back.
			var rest []db.OutboxClaimRow
			for _, r := range rows {
				if r.ID != z1 {
					rest = append(rest, r)
				}
			}
			_, err := e.drv.Outbox().Settle(e.ctx, e.pool, driver.Settlement{Released: fences(rest), MaxAttempts: 2})
			e.must(err, "release")
		}
	}
}

// recover: PUBLISHING with an expired lease -> PENDING, due now, or DEAD
// when its attempts are spent; the old claim's token is spent.
func outboxRecover(e *env) {
	a, b, spent, live := e.emit(tenantA, ""), e.emit(tenantB, "K"), e.emit(global, ""), e.emit(tenantA, "")
	rows := e.claimEvents(e.relay(), 10)
	e.wantEvents("every event", rows, a, b, spent, live)
	e.exec("UPDATE pginbox_outbox SET attempts = 3 WHERE id = $1 AND scope_id = ''", spent)
	e.exec(`UPDATE pginbox_outbox SET lease_expires_at = now() - interval '1 second' WHERE id = ANY($1::uuid[])`,
		[]string{a.UUIDString(), b.UUIDString(), spent.UUIDString()})
	got, err := e.drv.Outbox().Recover(e.ctx, e.pool, 3)
	e.must(err, "recover")
	recovered := map[inboxtype.ID]string{}
	for _, r := range got {
		recovered[r.ID] = r.Status
	}
	if len(recovered) != 3 || recovered[a] != "PENDING" || recovered[b] != "PENDING" || recovered[spent] != "DEAD" {
		e.Fatalf("recovered %v, want a and b PENDING, spent DEAD", recovered)
	}
	for _, id := range []inboxtype.ID{a, b} {
		if ev := e.event(id); ev.Status != "PENDING" || !ev.Due || ev.Token != "" || ev.Attempts != 1 {
			e.Fatalf("recovered event stored as %+v", ev)
		}
	}
	if ev := e.event(live); ev.Status != "PUBLISHING" {
		e.Fatalf("an event with a live lease was recovered: %+v", ev)
	}
	res, err := e.drv.Outbox().Settle(e.ctx, e.pool, driver.Settlement{Published: fences(rows), MaxAttempts: 3})
	e.must(err, "settle")
	if res.Marked != 1 || res.Lost != 3 {
		e.Fatalf("marking after recovery: %+v, want only the live one marked", res)
	}
	if got, err := e.drv.Outbox().Recover(e.ctx, e.pool, 3); err != nil || len(got) != 0 {
		e.Fatalf("a second recovery: %v, %v", got, err)
	}
}

// purge: the events published before the cutoff are deleted, in every
// scope, in batches; progress gets the running total.
func outboxPurge(e *env) {
	var old []inboxtype.ID
	for _, s := range []inboxtype.Scope{tenantA, tenantB, global, tenantA, tenantC} {
		old = append(old, e.emit(s, ""))
	}
	recent := e.emit(tenantA, "")
	rows := e.claimEvents(e.relay(), 10)
	e.wantEvents("the events to publish", rows, append(slices.Clone(old), recent)...)
	e.publish(rows)
	pending := e.emit(tenantB, "")
	e.exec(`UPDATE pginbox_outbox SET published_at = now() - interval '2 hours' WHERE id = ANY($1::uuid[])`, uuids(old))
	var cutoff time.Time
	e.must(e.pool.QueryRow(e.ctx, "SELECT now() - interval '1 hour'").Scan(&cutoff), "reading the cutoff")
	var progress []int64
	n, err := e.drv.Outbox().Purge(e.ctx, e.pool, cutoff, 2, func(total int64) { progress = append(progress, total) })
	e.must(err, "purge")
	if n != 5 {
		e.Fatalf("purged %d events, want 5", n)
	}
	if len(progress) == 0 || progress[len(progress)-1] != 5 || !slices.IsSorted(progress) {
		e.Fatalf("progress reported %v, want running totals up to 5", progress)
	}
	if left := e.count("SELECT count(*) FROM pginbox_outbox WHERE id = ANY($1::uuid[])", uuids(old)); left != 0 {
		e.Fatalf("%d events published before the cutoff left", left)
	}
	if left := e.count("SELECT count(*) FROM pginbox_outbox WHERE id = ANY($1::uuid[])", uuids([]inboxtype.ID{recent, pending})); left != 2 {
		e.Fatal("the purge deleted an event published after the cutoff, or an unpublished one")
	}
	if n, err := e.drv.Outbox().Purge(e.ctx, e.pool, cutoff, 2, nil); err != nil || n != 0 {
		e.Fatalf("a second purge: %d, %v", n, err)
	}
}

func uuids(ids []inboxtype.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.UUIDString()
	}
	return out
}
