package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/pginbox/pginbox/console"
	"github.com/pginbox/pginbox/inbox"
)

// keyed is an ordering key of tenant-a with a DEAD head and two receipts
// BLOCKED behind it.
type keyed struct {
	head, next, last inbox.ID
}

const orderKey = "order-7"

func (f *fixture) keyed(t *testing.T) keyed {
	t.Helper()
	var k keyed
	for i, id := range []*inbox.ID{&k.head, &k.next, &k.last} {
		res, err := f.client.Accept(context.Background(), inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant("tenant-a"), Source: "shop", Consumer: "orders.projection.v1", MessageID: "evt-k" + string(rune('1'+i))},
			EventType: "order.changed", SchemaVersion: 1,
			Payload:     map[string]any{"orderId": "o-7", "step": i + 1},
			OrderingKey: orderKey,
		})
		if err != nil {
			t.Fatal(err)
		}
		*id = res.ID
	}
	f.set(t, k.head, "status = 'DEAD', attempts = 10, version = 3, last_error = 'order o-7 not found'")
	for _, id := range []inbox.ID{k.next, k.last} {
		if !f.blocked(t, id) {
			t.Fatalf("fixture: %s is not BLOCKED behind the DEAD head", id)
		}
	}
	return k
}

// blocked reports whether a receipt waits behind an earlier one of its key.
func (f *fixture) blocked(t *testing.T, id inbox.ID) bool {
	t.Helper()
	var b bool
	if err := f.pool.QueryRow(context.Background(), "SELECT blocked FROM pginbox_receipts_live WHERE id = $1", id).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// skipForm reads the hidden fields of the Skip form.
func skipForm(t *testing.T, page string) (csrf, version string) {
	t.Helper()
	i := strings.Index(page, `/skip"`)
	if i < 0 {
		t.Fatalf("no skip form on the page:\n%s", page)
	}
	return formValues(t, page[i:])
}

func TestSkipUnblocksTheKeyAndIsAudited(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	k := f.keyed(t)
	b := newBrowser(t, f.serve(t, console.Config{Authenticate: tenantHook}))
	b.header.Set("X-User", "alice@example.com")
	b.header.Set("X-Tenant", "tenant-a")

	// The list shows which receipts wait for the key.
	res := b.get("/receipts?consumer=orders.projection.v1")
	for _, id := range []inbox.ID{k.next, k.last} {
		row := res.body[strings.Index(res.body, id.String()):]
		row = row[:strings.Index(row, "</tr>")]
		if !strings.Contains(row, ">blocked</span>") {
			t.Fatalf("list row of %s lacks the blocked tag:\n%s", id, row)
		}
	}
	// A waiting receipt says why and where to act.
	res = b.get("/receipts/" + k.next.String())
	wantBody(t, res, orderKey, "waits behind an earlier receipt of its key", "use Requeue or Skip",
		`id="key-blocked">1 receipt of its key (BLOCKED)`) // the last one waits behind it
	wantNoBody(t, res, "Skip receipt")

	// The DEAD head offers both requeue and skip.
	page := b.get("/receipts/" + k.head.String())
	wantBody(t, page, orderKey, "holds its key", `id="key-blocked">2 receipts of its key (BLOCKED)`,
		"Requeue receipt", "Skip receipt", "stays DEAD")
	token, version := skipForm(t, page.body)
	if version != "3" {
		t.Fatalf("skip form version %s, want 3", version)
	}
	res = b.post("/receipts/"+k.head.String()+"/skip", url.Values{"csrf": {token}, "version": {version}, "status": {"DEAD"}, "reason": {"o-7 was deleted upstream (INC-9)"}})
	wantCode(t, res, http.StatusSeeOther)
	loc := res.Header.Get("Location")
	if loc != "/receipts/"+k.head.String()+"?done=skipped" {
		t.Fatalf("redirect to %q", loc)
	}
	res = b.get(loc)
	wantBody(t, res, "Skipped: the receipt stays DEAD", "skipped: no longer holds its key",
		"alice@example.com", "o-7 was deleted upstream (INC-9)", "DEAD → DEAD", "3 → 4",
		"Requeue receipt") // it can still be requeued, now without order
	wantNoBody(t, res, "Skip receipt", "key-blocked")

	var action, actor, reason string
	if err := f.pool.QueryRow(context.Background(), "SELECT action, actor, reason FROM pginbox_audit WHERE receipt_id = $1", k.head).Scan(&action, &actor, &reason); err != nil {
		t.Fatal(err)
	}
	if action != "skip" || actor != "alice@example.com" || reason != "o-7 was deleted upstream (INC-9)" {
		t.Fatalf("audit row: action %q actor %q reason %q", action, actor, reason)
	}
	if st, v := f.state(t, k.head); st != "DEAD" || v != 4 {
		t.Fatalf("skipped head: %s v%d, want DEAD v4", st, v)
	}
	// The key's next receipt runs now; the one after it waits for that one.
	if f.blocked(t, k.next) {
		t.Fatal("the next receipt of the key is still BLOCKED after the skip")
	}
	if !f.blocked(t, k.last) {
		t.Fatal("the last receipt of the key no longer waits for the next one")
	}
	res = b.get("/receipts/" + k.next.String())
	wantBody(t, res, "It is PENDING: it waits for a worker.")
	wantNoBody(t, res, "waits behind an earlier receipt of its key")
}

func TestSkipRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	k := f.keyed(t)
	srv := f.serve(t, console.Config{})
	b := newBrowser(t, srv)
	path := "/receipts/" + k.head.String() + "/skip"
	token, version := skipForm(t, b.get("/receipts/"+k.head.String()).body)
	unchanged := func(what string) {
		t.Helper()
		if st, v := f.state(t, k.head); st != "DEAD" || v != 3 || f.auditCount(t) != 0 || !f.blocked(t, k.next) {
			t.Fatalf("%s changed something: head %s v%d, %d audit rows, next blocked %v", what, st, v, f.auditCount(t), f.blocked(t, k.next))
		}
	}

	// No CSRF token, or none matching.
	res := b.post(path, url.Values{"version": {version}, "reason": {"r"}})
	wantCode(t, res, http.StatusForbidden)
	wantBody(t, res, "security token is missing or does not match")
	res = newBrowser(t, srv).post(path, url.Values{"csrf": {token}, "version": {version}, "reason": {"r"}})
	wantCode(t, res, http.StatusForbidden)
	unchanged("a post without CSRF token")

	// No reason.
	res = b.post(path, url.Values{"csrf": {token}, "version": {version}, "reason": {" "}})
	wantCode(t, res, http.StatusBadRequest)
	wantBody(t, res, "A reason is required")
	unchanged("a post without reason")

	// A stale page: the conflict says what to do, and the reason goes back
	// into the skip form only.
	f.set(t, k.head, "version = 5, last_error = 'failed again'")
	res = b.post(path, url.Values{"csrf": {token}, "version": {version}, "status": {"DEAD"}, "reason": {"skip it"}})
	wantCode(t, res, http.StatusConflict)
	wantBody(t, res, "You acted on version 3 of this receipt, but it is now at version 5", "skip again if it still applies",
		`name="version" value="5"`, `name="reason" rows="3" required maxlength="1024">skip it</textarea>`)
	if strings.Count(res.body, ">skip it</textarea>") != 1 {
		t.Fatalf("the typed reason should be back in the skip form only:\n%s", res.body)
	}
	f.set(t, k.head, "version = 3")
	unchanged("a stale post")

	// A receipt without an ordering key offers no skip; a crafted post is
	// refused with what to do instead.
	page := b.get("/receipts/" + f.dead.String())
	wantBody(t, page, "Requeue receipt")
	wantNoBody(t, page, "Skip receipt", "/skip")
	res = b.post("/receipts/"+f.dead.String()+"/skip", url.Values{"csrf": {token}, "version": {"3"}, "status": {"DEAD"}, "reason": {"r"}})
	wantCode(t, res, http.StatusConflict)
	wantBody(t, res, "Nothing changed", "it has no ordering key, so it holds nothing back: requeue it instead", "Requeue receipt")
	// A receipt waiting behind the head points at the head.
	_, v := f.state(t, k.next)
	res = b.post("/receipts/"+k.next.String()+"/skip", url.Values{"csrf": {token}, "version": {strconv.FormatInt(v, 10)}, "reason": {"r"}})
	wantCode(t, res, http.StatusConflict)
	wantBody(t, res, "it waits behind an earlier receipt of its ordering key: act on that one (requeue or skip it if it is DEAD)")
	if st, v := f.state(t, f.dead); st != "DEAD" || v != 3 {
		t.Fatalf("refused skip changed the unkeyed receipt: %s v%d", st, v)
	}
	unchanged("a refused skip")

	// A read-only console neither offers nor takes a skip.
	ro := f.serve(t, console.Config{ReadOnly: true})
	rb := newBrowser(t, ro)
	res = rb.get("/receipts/" + k.head.String())
	wantBody(t, res, "read-only", orderKey, "holds its key")
	wantNoBody(t, res, "Skip receipt", `method="post"`)
	tok := &http.Cookie{Name: "pginbox_console_csrf", Value: strings.Repeat("A", 43)}
	u, _ := url.Parse(ro.URL)
	rb.c.Jar.SetCookies(u, []*http.Cookie{tok})
	res = rb.post(path, url.Values{"csrf": {tok.Value}, "version": {"3"}, "reason": {"r"}})
	wantCode(t, res, http.StatusForbidden)
	wantBody(t, res, "This console is read-only", "skip")
	unchanged("a read-only console")

	// Another tenant cannot skip it, even by ID.
	tb := newBrowser(t, f.serve(t, console.Config{Authenticate: tenantHook}))
	tb.header.Set("X-User", "bob")
	tb.header.Set("X-Tenant", "tenant-b")
	token, _ = formValues(t, tb.get("/receipts/"+f.otherDead.String()).body)
	res = tb.post(path, url.Values{"csrf": {token}, "version": {"3"}, "reason": {"r"}})
	wantCode(t, res, http.StatusNotFound)
	unchanged("another tenant's post")
}
