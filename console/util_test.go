package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/console"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// fixture is a database with receipts of two tenants in several states.
type fixture struct {
	pool      *pgxpool.Pool
	admin     *inbox.Admin
	client    *inbox.Client
	dead      inbox.ID // tenant-a, DEAD at version 3
	completed inbox.ID // tenant-a, COMPLETED 40 days ago at version 4
	pending   inbox.ID // tenant-a, PENDING
	otherDead inbox.ID // tenant-b, DEAD at version 3
	otherDone inbox.ID // tenant-b, COMPLETED 40 days ago
}

var quietLog = slog.New(slog.DiscardHandler)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := newPool(t)
	c, err := inbox.NewClient(pool, inbox.Config{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{pool: pool, client: c, admin: mustAdmin(t, pool)}
	f.dead = f.accept(t, inbox.Tenant("tenant-a"), "evt-1", map[string]string{"orderId": "o-1"}, nil)
	f.completed = f.accept(t, inbox.Tenant("tenant-a"), "evt-2", map[string]string{"orderId": "o-2"}, nil)
	f.pending = f.accept(t, inbox.Tenant("tenant-a"), "evt-3", map[string]string{"orderId": "o-3"}, nil)
	f.otherDead = f.accept(t, inbox.Tenant("tenant-b"), "evt-1", map[string]string{"orderId": "b-1"}, nil)
	f.otherDone = f.accept(t, inbox.Tenant("tenant-b"), "evt-2", map[string]string{"orderId": "b-2"}, nil)
	f.set(t, f.dead, "status = 'DEAD', attempts = 10, version = 3, last_error = 'unsupported currency XTS'")
	f.set(t, f.completed, "status = 'COMPLETED', attempts = 1, version = 4, completed_at = now() - interval '40 days'")
	f.set(t, f.otherDead, "status = 'DEAD', attempts = 10, version = 3, last_error = 'tenant-b secret failure'")
	f.set(t, f.otherDone, "status = 'COMPLETED', attempts = 1, version = 2, completed_at = now() - interval '40 days'")
	return f
}

func (f *fixture) accept(t *testing.T, scope inbox.Scope, msgID string, payload any, md map[string]string) inbox.ID {
	t.Helper()
	res, err := f.client.Accept(context.Background(), inbox.Message{
		Identity:  inbox.Identity{Scope: scope, Source: "shop", Consumer: "orders.projection.v1", MessageID: msgID},
		EventType: "order.placed", SchemaVersion: 1,
		Payload: payload, Metadata: md,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// set forces a receipt's columns with SQL, as a fixture or as "someone else
// changed it".
func (f *fixture) set(t *testing.T, id inbox.ID, set string, args ...any) {
	t.Helper()
	inboxtest.SetState(t, f.pool, id, set, args...)
}

// state is a receipt's status and version as stored.
func (f *fixture) state(t *testing.T, id inbox.ID) (status string, version int64) {
	t.Helper()
	err := f.pool.QueryRow(context.Background(), "SELECT status, version FROM pginbox_receipts_live WHERE id = $1", id).Scan(&status, &version)
	if err != nil {
		t.Fatal(err)
	}
	return status, version
}

func (f *fixture) auditCount(t *testing.T) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_audit").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// serve starts the console on a loopback httptest server.
func (f *fixture) serve(t *testing.T, cfg console.Config) *httptest.Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLog
	}
	h, err := console.New(f.admin, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// browser is an HTTP client with cookies that does not follow redirects, so
// tests see every answer.
type browser struct {
	t      *testing.T
	base   string
	c      *http.Client
	header http.Header // sent with every request
}

func newBrowser(t *testing.T, srv *httptest.Server) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: srv.URL, header: http.Header{}, c: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// response is an answer with its body read.
type response struct {
	*http.Response
	body string
}

func (b *browser) do(method, path string, form url.Values) response {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	for k, v := range b.header {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return response{Response: res, body: string(raw)}
}

func (b *browser) get(path string) response { b.t.Helper(); return b.do(http.MethodGet, path, nil) }

func (b *browser) post(path string, form url.Values) response {
	b.t.Helper()
	return b.do(http.MethodPost, path, form)
}

var (
	csrfRe    = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	versionRe = regexp.MustCompile(`name="version" value="([0-9]+)"`)
)

// formValues reads the hidden fields of the action form on a receipt page.
func formValues(t *testing.T, page string) (csrf, version string) {
	t.Helper()
	m := csrfRe.FindStringSubmatch(page)
	v := versionRe.FindStringSubmatch(page)
	if m == nil || v == nil {
		t.Fatalf("no action form with csrf and version on the page:\n%s", page)
	}
	return m[1], v[1]
}

func wantCode(t *testing.T, res response, code int) {
	t.Helper()
	if res.StatusCode != code {
		t.Fatalf("%s %s: status %d, want %d; body:\n%s", res.Request.Method, res.Request.URL.Path, res.StatusCode, code, res.body)
	}
}

func wantBody(t *testing.T, res response, substrs ...string) {
	t.Helper()
	for _, s := range substrs {
		if !strings.Contains(res.body, s) {
			t.Fatalf("%s %s: body lacks %q; body:\n%s", res.Request.Method, res.Request.URL.Path, s, res.body)
		}
	}
}

func wantNoBody(t *testing.T, res response, substrs ...string) {
	t.Helper()
	for _, s := range substrs {
		if strings.Contains(res.body, s) {
			t.Fatalf("%s %s: body contains %q; body:\n%s", res.Request.Method, res.Request.URL.Path, s, res.body)
		}
	}
}

// tenantHook authenticates from test headers: X-User names the actor,
// X-Tenant the tenant ("*" for every scope). A real hook reads a session.
func tenantHook(r *http.Request) (string, console.Scope, error) {
	user := r.Header.Get("X-User")
	if user == "" {
		return "", console.Scope{}, errSignIn
	}
	if t := r.Header.Get("X-Tenant"); t != "*" {
		return user, console.Tenant(t), nil
	}
	return user, console.AllScopes(), nil
}

var errSignIn = &signInError{}

type signInError struct{}

func (*signInError) Error() string { return "sign in at /login first" }

// mustAdmin returns an Admin on pool with the tests' quiet logger.
func mustAdmin(t testing.TB, pool *pgxpool.Pool) *inbox.Admin {
	t.Helper()
	a, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
