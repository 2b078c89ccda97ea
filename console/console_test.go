package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/console"
	"github.com/pginbox/pginbox/inbox"
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	// A pool connects lazily: nothing here reaches a database.
	pool, err := pgxpool.New(context.Background(), "host=/nonexistent dbname=none")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	admin := mustAdmin(t, pool)
	hook := func(*http.Request) (string, console.Scope, error) { return "a", console.AllScopes(), nil }

	if _, err := console.New(nil, console.Config{}); err == nil || !strings.Contains(err.Error(), "admin is nil") {
		t.Fatalf("nil admin: %v", err)
	}
	for _, tc := range []struct {
		name string
		cfg  console.Config
		want string // the field the error must name
	}{
		{"prefix without slash", console.Config{Prefix: "admin"}, "Config.Prefix"},
		{"prefix with trailing slash", console.Config{Prefix: "/admin/"}, "Config.Prefix"},
		{"prefix with a pattern", console.Config{Prefix: "/{x}"}, "Config.Prefix"},
		{"refresh too fast", console.Config{RefreshInterval: time.Millisecond}, "Config.RefreshInterval"},
		{"refresh negative", console.Config{RefreshInterval: -time.Second}, "Config.RefreshInterval"},
		{"refresh too slow", console.Config{RefreshInterval: 2 * time.Hour}, "Config.RefreshInterval"},
		{"page size negative", console.Config{PageSize: -1}, "Config.PageSize"},
		{"page size too large", console.Config{PageSize: inbox.MaxListLimit + 1}, "Config.PageSize"},
		{"local actor with control char", console.Config{LocalActor: "a\nb"}, "Config.LocalActor"},
		{"local actor too long", console.Config{LocalActor: strings.Repeat("a", 256)}, "Config.LocalActor"},
		{"local tenant empty", console.Config{LocalScope: console.Tenant("")}, "Config.LocalScope"},
		{"local actor with hook", console.Config{Authenticate: hook, LocalActor: "ops"}, "Config.LocalActor"},
		{"local scope with hook", console.Config{Authenticate: hook, LocalScope: console.Global()}, "Config.LocalScope"},
	} {
		_, err := console.New(admin, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	for _, cfg := range []console.Config{
		{},
		{Prefix: "/admin/inbox", RefreshInterval: time.Second, PageSize: inbox.MaxListLimit, ReadOnly: true},
		{LocalActor: "alice", LocalScope: console.Tenant("acme")},
		{Authenticate: hook},
	} {
		if _, err := console.New(admin, cfg); err != nil {
			t.Errorf("valid config %+v refused: %v", cfg, err)
		}
	}
}

func TestPagesAndStatusCodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := newBrowser(t, f.serve(t, console.Config{}))
	unknown := inbox.ID{1, 2, 3}
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/", http.StatusOK, "orders.projection.v1"},
		{"/receipts", http.StatusOK, f.dead.String()},
		{"/receipts?status=DEAD&consumer=orders.projection.v1", http.StatusOK, f.otherDead.String()},
		{"/receipts/" + f.dead.String(), http.StatusOK, "unsupported currency XTS"},
		{"/receipts/" + f.dead.UUIDString(), http.StatusOK, f.dead.String()}, // UUID form works too
		{"/dead", http.StatusOK, "unsupported currency XTS"},
		{"/purge", http.StatusOK, "Dry run"},
		{"/purge?older_than=30d", http.StatusOK, "would lose their payload"},
		{"/purge?older_than=soon", http.StatusBadRequest, "30d"},
		{"/receipts?since=yesterday", http.StatusBadRequest, "created since"},
		{"/receipts?status=GONE", http.StatusBadRequest, "want PENDING"},
		{"/receipts?after=nope", http.StatusBadRequest, "Next page"},
		{"/receipts/not-an-id", http.StatusNotFound, "not a receipt ID"},
		{"/receipts/" + unknown.String(), http.StatusNotFound, "Receipt not found: " + unknown.String()},
		{"/no/such/page", http.StatusNotFound, "no page at this address"},
		{"/static/console.css", http.StatusOK, ".badge-dead"},
		{"/static/console.js", http.StatusOK, "data-refresh"},
		{"/static/nope.css", http.StatusNotFound, ""},
	} {
		res := b.get(tc.path)
		wantCode(t, res, tc.code)
		wantBody(t, res, tc.want)
	}
	for file, ct := range map[string]string{"console.css": "text/css; charset=utf-8", "console.js": "text/javascript; charset=utf-8", "favicon.svg": "image/svg+xml"} {
		res := b.get("/static/" + file)
		if got := res.Header.Get("Content-Type"); got != ct {
			t.Errorf("%s: Content-Type %q, want %q", file, got, ct)
		}
		// Revalidation by ETag answers 304 without the body.
		req, _ := http.NewRequest(http.MethodGet, b.base+"/static/"+file, nil)
		req.Header.Set("If-None-Match", res.Header.Get("ETag"))
		again, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		again.Body.Close()
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("%s: revalidation %d, want 304", file, again.StatusCode)
		}
	}
	res := b.get("/")
	// A receipt page always carries the version its actions expect.
	res = b.get("/receipts/" + f.dead.String())
	if _, v := formValues(t, res.body); v != "3" {
		t.Errorf("requeue form version %s, want 3", v)
	}
	// The overview counts what the fixture has: 2 DEAD, 1 PENDING due.
	res = b.get("/")
	wantBody(t, res, `<span class="card-n" id="n-dead">2</span> <span class="card-l">dead</span>`,
		`<span class="card-n" id="n-due">1</span> <span class="card-l">due now</span>`, `data-refresh="5"`,
		`<noscript><meta http-equiv="refresh" content="5"></noscript>`)
	// A GET to an action is not an action.
	wantCode(t, b.get("/receipts/"+f.dead.String()+"/requeue"), http.StatusNotFound)
	if st, _ := f.state(t, f.dead); st != "DEAD" {
		t.Fatalf("status %s after GET", st)
	}
}

func TestHostileValuesRenderInert(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const script = `<script>alert(1)</script>`
	const img = `"><img src=x onerror=alert(2)>`
	const quoteBreak = `' onmouseover='alert(3)`
	hostile := script + img + quoteBreak
	id := f.accept(t, inbox.Tenant("tenant-a"), "evil-1",
		map[string]string{"note": hostile, script: img},
		map[string]string{"trace" + img: hostile, "x-" + script: "v"})
	f.set(t, id, "status = 'DEAD', last_error = $2", "handler said: "+hostile)

	b := newBrowser(t, f.serve(t, console.Config{}))
	for _, path := range []string{"/receipts/" + id.String(), "/dead", "/receipts?status=DEAD", "/"} {
		res := b.get(path)
		wantCode(t, res, http.StatusOK)
		// The only script element is the console's own file, and no
		// attacker-made element or attribute exists.
		if n := strings.Count(strings.ToLower(res.body), "<script"); n != 1 {
			t.Errorf("%s: %d <script elements, want only the console's own", path, n)
		}
		wantNoBody(t, res, "<img", "onerror=alert(2)>", "' onmouseover='")
		wantBody(t, res, `<script src="/static/console.js?v=`)
	}
	res := b.get("/receipts/" + id.String())
	// Payload (pretty-printed, keys included), last error and metadata are all
	// shown, as text.
	wantBody(t, res,
		`&lt;script&gt;alert(1)&lt;/script&gt;`,
		`&#34;&gt;&lt;img src=x onerror=alert(2)&gt;`,
		`&#39; onmouseover=&#39;alert(3)`,
		`handler said: &lt;script&gt;`, // last error
		`trace&#34;&gt;&lt;img`,        // a metadata key
		`x-&lt;script&gt;alert(1)&lt;/script&gt;`,
		"\n  &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;: &#34;\\&#34;&gt;&lt;img", // pretty-printed JSON
	)
	wantBody(t, b.get("/dead"), `handler said: &lt;script&gt;alert(1)&lt;/script&gt;&#34;&gt;&lt;img`)
}

func TestCSRFRefusesForgedPosts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.serve(t, console.Config{})
	b := newBrowser(t, srv)
	page := b.get("/receipts/" + f.dead.String())
	token, version := formValues(t, page.body)
	path := "/receipts/" + f.dead.String() + "/requeue"
	form := func(tok string) url.Values {
		v := url.Values{"version": {version}, "reason": {"fixed"}}
		if tok != "" {
			v.Set("csrf", tok)
		}
		return v
	}

	// No token in the form.
	res := b.post(path, form(""))
	wantCode(t, res, http.StatusForbidden)
	wantBody(t, res, "security token is missing or does not match", "Reload the page")
	// A wrong token.
	res = b.post(path, form(strings.Repeat("A", len(token))))
	wantCode(t, res, http.StatusForbidden)
	// The right form value from a browser without the cookie (another site's
	// page cannot send it: SameSite=Strict).
	stranger := newBrowser(t, srv)
	res = stranger.post(path, form(token))
	wantCode(t, res, http.StatusForbidden)
	wantBody(t, res, "security cookie is missing")
	// The right token, but the browser says the request comes from another site.
	b.header.Set("Sec-Fetch-Site", "cross-site")
	res = b.post(path, form(token))
	wantCode(t, res, http.StatusForbidden)
	wantBody(t, res, "another site")
	b.header.Del("Sec-Fetch-Site")
	b.header.Set("Origin", "http://evil.example")
	res = b.post(path, form(token))
	wantCode(t, res, http.StatusForbidden)
	b.header.Del("Origin")

	if st, v := f.state(t, f.dead); st != "DEAD" || v != 3 || f.auditCount(t) != 0 {
		t.Fatalf("a refused post changed the receipt: %s v%d, %d audit rows", st, v, f.auditCount(t))
	}
	// Same origin and the right token: done.
	b.header.Set("Sec-Fetch-Site", "same-origin")
	res = b.post(path, form(token))
	wantCode(t, res, http.StatusSeeOther)
	if st, _ := f.state(t, f.dead); st != "PENDING" {
		t.Fatalf("status %s after requeue, want PENDING", st)
	}
}

func TestStaleVersionIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := newBrowser(t, f.serve(t, console.Config{}))
	page := b.get("/receipts/" + f.dead.String())
	token, version := formValues(t, page.body)
	// Meanwhile someone else requeues it and a worker fails it again.
	f.set(t, f.dead, "status = 'DEAD', version = 5, last_error = 'failed again'")

	res := b.post("/receipts/"+f.dead.String()+"/requeue", url.Values{"csrf": {token}, "version": {version}, "status": {"DEAD"}, "reason": {"retry"}})
	wantCode(t, res, http.StatusConflict)
	wantBody(t, res, "Nothing changed: the receipt changed meanwhile",
		"You acted on version 3 of this receipt, but it is now at version 5",
		"It is still DEAD, but attempts, error or audit trail may have changed.",
		"failed again",             // the current state is shown
		`name="version" value="5"`, // and the form now expects the current version
		">retry</textarea>")        // keeping what the user typed
	if st, v := f.state(t, f.dead); st != "DEAD" || v != 5 || f.auditCount(t) != 0 {
		t.Fatalf("stale requeue changed the receipt: %s v%d, %d audit rows", st, v, f.auditCount(t))
	}

	// A status the page showed is repeated only when it is a status.
	f.set(t, f.dead, "status = 'RETRYABLE', version = 6")
	res = b.post("/receipts/"+f.dead.String()+"/requeue", url.Values{"csrf": {token}, "version": {"5"}, "status": {"<b>x</b>"}, "reason": {"retry"}})
	wantCode(t, res, http.StatusConflict)
	wantNoBody(t, res, "status changed from", "&lt;b&gt;")
	res = b.post("/receipts/"+f.dead.String()+"/requeue", url.Values{"csrf": {token}, "version": {"5"}, "status": {"DEAD"}, "reason": {"retry"}})
	wantBody(t, res, "Its status changed from DEAD to RETRYABLE.")
	f.set(t, f.dead, "status = 'DEAD', version = 5")

	// A receipt that moved to a state the action does not apply to says so.
	page = b.get("/receipts/" + f.dead.String())
	token, version = formValues(t, page.body)
	f.set(t, f.dead, "status = 'COMPLETED', completed_at = now()")
	res = b.post("/receipts/"+f.dead.String()+"/requeue", url.Values{"csrf": {token}, "version": {version}, "reason": {"retry"}})
	wantCode(t, res, http.StatusConflict)
	wantBody(t, res, "it is COMPLETED, requeue needs DEAD or RETRYABLE", "replay it")

	// An empty reason is refused before anything is tried.
	page = b.get("/receipts/" + f.completed.String())
	token, version = formValues(t, page.body)
	res = b.post("/receipts/"+f.completed.String()+"/replay", url.Values{"csrf": {token}, "version": {version}, "reason": {"  "}})
	wantCode(t, res, http.StatusBadRequest)
	wantBody(t, res, "A reason is required")
	res = b.post("/receipts/"+f.completed.String()+"/replay", url.Values{"csrf": {token}, "version": {"x"}, "reason": {"r"}})
	wantCode(t, res, http.StatusBadRequest)
	wantBody(t, res, "no valid receipt version")
	if f.auditCount(t) != 0 {
		t.Fatal("a refused action was audited")
	}
}

func TestActionsAreAuditedWithTheActor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := newBrowser(t, f.serve(t, console.Config{Authenticate: tenantHook}))
	b.header.Set("X-User", "alice@example.com")
	b.header.Set("X-Tenant", "tenant-a")

	// Requeue.
	page := b.get("/receipts/" + f.dead.String())
	wantBody(t, page, "Requeue receipt", "Signed in as <strong>alice@example.com</strong>", "Scope: <strong>tenant(tenant-a)</strong>")
	wantNoBody(t, page, "No authentication configured")
	token, version := formValues(t, page.body)
	res := b.post("/receipts/"+f.dead.String()+"/requeue", url.Values{"csrf": {token}, "version": {version}, "reason": {"currency table fixed"}})
	wantCode(t, res, http.StatusSeeOther)
	loc := res.Header.Get("Location")
	if loc != "/receipts/"+f.dead.String()+"?done=requeued" {
		t.Fatalf("redirect to %q", loc)
	}
	res = b.get(loc)
	wantBody(t, res, "Requeued: the receipt is PENDING again", "alice@example.com", "currency table fixed", "DEAD → PENDING", "3 → 4")
	var actor, reason string
	if err := f.pool.QueryRow(context.Background(), "SELECT actor, reason FROM pginbox_audit WHERE receipt_id = $1", f.dead).Scan(&actor, &reason); err != nil {
		t.Fatal(err)
	}
	if actor != "alice@example.com" || reason != "currency table fixed" {
		t.Fatalf("audit row: actor %q reason %q", actor, reason)
	}

	// Replay.
	page = b.get("/receipts/" + f.completed.String())
	token, version = formValues(t, page.body)
	res = b.post("/receipts/"+f.completed.String()+"/replay", url.Values{"csrf": {token}, "version": {version}, "reason": {"rebuild projection"}})
	wantCode(t, res, http.StatusSeeOther)
	res = b.get(res.Header.Get("Location"))
	wantBody(t, res, "Replayed: a new PENDING receipt", "Replays", "rebuild projection")
	var replays int
	if err := f.pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_receipts_live WHERE replay_of = $1", f.completed).Scan(&replays); err != nil {
		t.Fatal(err)
	}
	if replays != 1 || f.auditCount(t) != 2 {
		t.Fatalf("%d replays, %d audit rows; want 1 and 2", replays, f.auditCount(t))
	}

	// Purge: a dry run first (count and cutoff), then the confirmed purge with
	// that cutoff. tenant-b's old receipt is not touched.
	res = b.get("/purge?older_than=30d")
	wantBody(t, res, "<strong>1</strong> receipts completed before", "Purge 1 payloads")
	cutoff := regexp.MustCompile(`name="cutoff" value="([^"]+)"`).FindStringSubmatch(res.body)
	if cutoff == nil {
		t.Fatalf("no cutoff in the confirm form:\n%s", res.body)
	}
	if cut, err := time.Parse(time.RFC3339Nano, cutoff[1]); err != nil || time.Since(cut) < 29*24*time.Hour {
		t.Fatalf("cutoff %q (%v): want about 30 days ago", cutoff[1], err)
	}
	token = csrfRe.FindStringSubmatch(res.body)[1]
	res = b.post("/purge", url.Values{"csrf": {token}, "cutoff": {cutoff[1]}, "older_than": {"30d"}})
	wantCode(t, res, http.StatusOK)
	wantBody(t, res, "Purged the payloads of <strong>1</strong> receipts")
	var purgedA, purgedB bool
	f.pool.QueryRow(context.Background(), "SELECT payload IS NULL FROM pginbox_receipts_live WHERE id = $1", f.completed).Scan(&purgedA)
	f.pool.QueryRow(context.Background(), "SELECT payload IS NULL FROM pginbox_receipts_live WHERE id = $1", f.otherDone).Scan(&purgedB)
	if !purgedA || purgedB {
		t.Fatalf("purged: tenant-a %v (want true), tenant-b %v (want false)", purgedA, purgedB)
	}
	// A purged receipt shows no payload and offers no replay.
	res = b.get("/receipts/" + f.completed.String())
	wantBody(t, res, "by retention", "cannot be replayed")
	wantNoBody(t, res, "o-2", "Replay receipt")
	// A confirm form with a cutoff in the future is refused.
	res = b.post("/purge", url.Values{"csrf": {token}, "cutoff": {time.Now().Add(time.Hour).Format(time.RFC3339Nano)}})
	wantCode(t, res, http.StatusBadRequest)
	wantBody(t, res, "no valid cutoff in the past")
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := newBrowser(t, f.serve(t, console.Config{Authenticate: tenantHook}))
	b.header.Set("X-User", "alice")
	b.header.Set("X-Tenant", "tenant-a")

	// tenant-b's receipts are invisible in every page...
	for _, path := range []string{"/", "/receipts", "/receipts?status=DEAD", "/dead"} {
		res := b.get(path)
		wantCode(t, res, http.StatusOK)
		wantNoBody(t, res, f.otherDead.String(), f.otherDone.String(), "tenant-b secret failure")
	}
	wantBody(t, b.get("/receipts"), f.dead.String(), f.completed.String())
	// ...and by ID.
	res := b.get("/receipts/" + f.otherDead.String())
	wantCode(t, res, http.StatusNotFound)
	wantNoBody(t, res, "tenant-b secret failure")
	// Acting on it with a valid token is "not found" too, and changes nothing.
	token, _ := formValues(t, b.get("/receipts/"+f.dead.String()).body)
	res = b.post("/receipts/"+f.otherDead.String()+"/requeue", url.Values{"csrf": {token}, "version": {"3"}, "reason": {"x"}})
	wantCode(t, res, http.StatusNotFound)
	if st, v := f.state(t, f.otherDead); st != "DEAD" || v != 3 || f.auditCount(t) != 0 {
		t.Fatalf("tenant-a changed tenant-b's receipt: %s v%d", st, v)
	}
	// The overview counts tenant-a only: one DEAD.
	wantBody(t, b.get("/"), `<span class="card-n" id="n-dead">1</span> <span class="card-l">dead</span>`)

	// An operator sees both.
	b.header.Set("X-Tenant", "*")
	wantBody(t, b.get("/receipts/"+f.otherDead.String()), "tenant-b secret failure")
	wantBody(t, b.get("/"), `<span class="card-n" id="n-dead">2</span> <span class="card-l">dead</span>`)
}

func TestAuthenticateHookRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hook := func(r *http.Request) (string, console.Scope, error) {
		switch r.Header.Get("X-Case") {
		case "no-actor":
			return "", console.AllScopes(), nil
		case "no-scope":
			return "bob", console.Scope{}, nil
		case "empty-tenant":
			return "bob", console.Tenant(""), nil
		}
		return tenantHook(r)
	}
	b := newBrowser(t, f.serve(t, console.Config{Authenticate: hook}))
	res := b.get("/")
	wantCode(t, res, http.StatusUnauthorized)
	wantBody(t, res, "Not signed in", "sign in at /login first")
	for _, tc := range []struct{ hdr, want string }{
		{"no-actor", "invalid actor"},
		{"no-scope", "no scope"},
		{"empty-tenant", "an empty tenant ID"},
	} {
		b.header.Set("X-Case", tc.hdr)
		res = b.get("/receipts")
		wantCode(t, res, http.StatusInternalServerError)
		wantBody(t, res, "Config.Authenticate returned no error but", tc.want)
		wantNoBody(t, res, f.dead.String())
	}
}

func TestReadOnlyHidesAndRefusesActions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.serve(t, console.Config{ReadOnly: true})
	b := newBrowser(t, srv)
	for _, path := range []string{"/receipts/" + f.dead.String(), "/receipts/" + f.completed.String(), "/purge?older_than=30d"} {
		res := b.get(path)
		wantCode(t, res, http.StatusOK)
		wantBody(t, res, "Read-only", "read-only")
		wantNoBody(t, res, `method="post"`, `name="csrf"`, "Requeue receipt", "Replay receipt", "Purge 2 payloads")
	}
	wantBody(t, b.get("/purge?older_than=30d"), "<strong>2</strong> receipts completed before") // the dry run still counts

	// Even a well-formed post with a valid token is refused.
	tok := &http.Cookie{Name: "pginbox_console_csrf", Value: strings.Repeat("A", 43)}
	u, _ := url.Parse(srv.URL)
	b.c.Jar.SetCookies(u, []*http.Cookie{tok})
	for _, path := range []string{"/receipts/" + f.dead.String() + "/requeue", "/receipts/" + f.completed.String() + "/replay", "/purge"} {
		res := b.post(path, url.Values{"csrf": {tok.Value}, "version": {"3"}, "reason": {"x"}, "cutoff": {time.Now().Add(-time.Hour).Format(time.RFC3339Nano)}})
		wantCode(t, res, http.StatusForbidden)
		wantBody(t, res, "This console is read-only")
	}
	if st, _ := f.state(t, f.dead); st != "DEAD" || f.auditCount(t) != 0 {
		t.Fatal("read-only console changed something")
	}
	var purged int
	f.pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_receipts_live WHERE payload IS NULL").Scan(&purged)
	if purged != 0 {
		t.Fatal("read-only console purged")
	}
}

func TestWithoutHookLoopbackOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h, err := console.New(f.admin, console.Config{Logger: quietLog, LocalActor: "oncall"})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(remote string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/receipts/"+f.dead.String(), nil)
		req.RemoteAddr = remote
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, remote := range []string{"192.0.2.10:40000", "[2001:db8::1]:40000", "10.0.0.1:1"} {
		rec := serve(remote)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "configure Config.Authenticate") &&
			!strings.Contains(rec.Body.String(), "Config.Authenticate set") {
			t.Fatalf("%s: %d %s", remote, rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), "unsupported currency") {
			t.Fatalf("%s: refused page shows the receipt", remote)
		}
	}
	for _, remote := range []string{"127.0.0.1:40000", "[::1]:40000", "127.8.9.10:1", "[::ffff:127.0.0.1]:1"} {
		rec := serve(remote)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "unsupported currency") {
			t.Fatalf("%s: %d", remote, rec.Code)
		}
	}
	// A loopback connection from a proxy may carry anyone's request.
	rec := serve("127.0.0.1:40000", "X-Forwarded-For", "203.0.113.9")
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "came through a proxy") {
		t.Fatalf("proxied: %d %s", rec.Code, rec.Body)
	}
	// Every page says that no authentication is configured, and who acts.
	b := newBrowser(t, f.serve(t, console.Config{LocalActor: "oncall"}))
	for _, path := range []string{"/", "/receipts", "/receipts/" + f.dead.String(), "/dead", "/purge", "/nope"} {
		wantBody(t, b.get(path), "No authentication configured", "loopback", "records actions as “oncall”")
	}
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.serve(t, console.Config{})
	b := newBrowser(t, srv)
	for _, path := range []string{"/", "/receipts", "/receipts/" + f.dead.String(), "/dead", "/purge", "/nope", "/static/console.css"} {
		res := b.get(path)
		h := res.Header
		csp := h.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, d) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, d)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP allows inline code: %q", path, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: headers %v", path, h)
		}
		if strings.HasPrefix(path, "/static/") {
			continue
		}
		if h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control %q", path, h.Get("Cache-Control"))
		}
		// No inline script or style in the markup either (the CSP would block it).
		wantNoBody(t, res, "<style", " style=", " onclick=", " onload=", "javascript:")
		if n := strings.Count(res.body, "<script"); n != 1 || !strings.Contains(res.body, `<script src="/static/console.js?v=`) {
			t.Errorf("%s: inline or extra script", path)
		}
	}
	// A 403 for a remote client carries them too.
	h, _ := console.New(f.admin, console.Config{Logger: quietLog})
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || rec.Header().Get("Content-Security-Policy") == "" || rec.Header().Get("X-Frame-Options") != "DENY" {
		t.Fatalf("refusal: %d %v", rec.Code, rec.Header())
	}

	// The CSRF cookie: HttpOnly, SameSite=Strict; its token appears only in
	// hidden fields of POST forms, never in a URL.
	res := b.get("/receipts/" + f.dead.String())
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "pginbox_console_csrf" {
			cookie = c
		}
	}
	if cookie == nil {
		// The browser got it on its first page; ask as a new one.
		res = newBrowser(t, srv).get("/receipts/" + f.dead.String())
		for _, c := range res.Cookies() {
			if c.Name == "pginbox_console_csrf" {
				cookie = c
			}
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" {
		t.Fatalf("csrf cookie %+v", cookie)
	}
	token, _ := formValues(t, res.body)
	if token != cookie.Value {
		t.Fatal("form token differs from the cookie")
	}
	if n, m := strings.Count(res.body, token), strings.Count(res.body, `<input type="hidden" name="csrf" value="`+token+`">`); n != m || n == 0 {
		t.Fatalf("token appears %d times, %d of them in hidden fields", n, m)
	}
	for _, form := range regexp.MustCompile(`(?s)<form[^>]*method="get".*?</form>`).FindAllString(res.body, -1) {
		if strings.Contains(form, "csrf") {
			t.Fatalf("a GET form carries the csrf token: %s", form)
		}
	}
}

func TestListFiltersAndPaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var more []inbox.ID
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		more = append(more, f.accept(t, inbox.Global(), id, map[string]string{"n": id}, nil))
	}
	b := newBrowser(t, f.serve(t, console.Config{PageSize: 3}))

	// Eight receipts in ID (creation) order, three per page.
	res := b.get("/receipts")
	wantBody(t, res, f.dead.String(), f.completed.String(), f.pending.String(), "Next page")
	wantNoBody(t, res, f.otherDead.String(), "First page")
	next := regexp.MustCompile(`rel="next" href="([^"]+)"`).FindStringSubmatch(res.body)
	if next == nil {
		t.Fatal("no next link")
	}
	res = b.get(strings.ReplaceAll(next[1], "&amp;", "&"))
	wantBody(t, res, f.otherDead.String(), f.otherDone.String(), more[0].String(), "First page", "Next page")
	wantNoBody(t, res, f.dead.String())
	next = regexp.MustCompile(`rel="next" href="([^"]+)"`).FindStringSubmatch(res.body)
	res = b.get(strings.ReplaceAll(next[1], "&amp;", "&"))
	wantBody(t, res, more[1].String(), more[2].String())
	wantNoBody(t, res, "Next page")

	// Filters: status, consumer, source, scope column for the operator view.
	res = b.get("/receipts?status=DEAD")
	wantBody(t, res, f.dead.String(), f.otherDead.String(), "tenant(tenant-b)", `value="DEAD" checked`)
	wantNoBody(t, res, f.pending.String())
	wantNoBody(t, b.get("/receipts?consumer=billing.v1"), f.dead.String())
	wantNoBody(t, b.get("/receipts?source=other"), f.dead.String())
	wantBody(t, b.get("/receipts?source=shop&status=dead&status=completed"), f.completed.String(), f.dead.String())
	// Paging keeps the filter.
	res = b.get("/receipts?status=DEAD&status=COMPLETED&since=1000h") // the COMPLETED fixtures were created 40 days ago
	wantBody(t, res, "since=1000h&amp;status=DEAD&amp;status=COMPLETED")
	wantNoBody(t, b.get("/receipts?until=2000-01-01"), f.dead.String())
	wantBody(t, b.get("/receipts?since=2000-01-01T00:00:00Z"), f.dead.String())
}

func TestMountedUnderPrefix(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h, err := console.New(f.admin, console.Config{Logger: quietLog, Prefix: "/admin/inbox"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/inbox/", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "the application", http.StatusTeapot) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b := newBrowser(t, srv)

	res := b.get("/admin/inbox/")
	wantCode(t, res, http.StatusOK)
	wantBody(t, res, `href="/admin/inbox/receipts"`, `href="/admin/inbox/dead"`, `src="/admin/inbox/static/console.js?v=`)
	wantNoBody(t, res, `href="/receipts`)
	res = b.get("/admin/inbox/receipts/" + f.dead.String())
	wantBody(t, res, `action="/admin/inbox/receipts/`+f.dead.String()+`/requeue"`)
	token, version := formValues(t, res.body)
	res = b.post("/admin/inbox/receipts/"+f.dead.String()+"/requeue", url.Values{"csrf": {token}, "version": {version}, "reason": {"r"}})
	wantCode(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); !strings.HasPrefix(loc, "/admin/inbox/receipts/") {
		t.Fatalf("redirect %q", loc)
	}
	for _, c := range b.c.Jar.Cookies(mustURL(t, srv.URL+"/admin/inbox/")) {
		if c.Name == "pginbox_console_csrf" {
			goto found
		}
	}
	t.Fatal("no csrf cookie under the prefix")
found:
	if len(b.c.Jar.Cookies(mustURL(t, srv.URL+"/"))) != 0 {
		t.Fatal("the csrf cookie leaks to the application's other paths")
	}
	wantCode(t, b.get("/admin/inbox/static/console.css"), http.StatusOK)
	wantCode(t, b.get("/elsewhere"), http.StatusTeapot)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
