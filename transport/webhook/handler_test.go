package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/transport/webhook"
)

var (
	secretA = []byte("0123456789abcdef0123456789abcdef")
	secretB = []byte("fedcba9876543210fedcba9876543210")
	keys    = []webhook.Key{
		{ID: "key-a", Secret: secretA, Scope: inbox.Tenant("tenant-a")},
		{ID: "key-b", Secret: secretB, Scope: inbox.Tenant("tenant-b")},
	}
)

// fixture is a webhook endpoint on a real HTTP server and a real database.
type fixture struct {
	srv  *httptest.Server
	pool *pgxpool.Pool
	h    *webhook.Handler
}

func newFixture(t *testing.T, pool *pgxpool.Pool, configure func(*webhook.Config)) *fixture {
	t.Helper()
	if pool == nil {
		pool = testPool(t, testDSN(t), nil)
	}
	client, err := inbox.NewClient(pool, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := webhook.Config{Keys: keys, Decode: webhook.Envelope("shop", "orders.projection.v1")}
	if configure != nil {
		configure(&cfg)
	}
	h, err := webhook.NewHandler(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, pool: pool, h: h}
}

// request is one webhook request before it is sent.
type request struct {
	method   string
	body     []byte
	keyID    string
	secret   []byte
	at       time.Time
	idemKey  string
	tamper   func(h http.Header, body []byte) []byte // after signing
	unsigned bool
	headers  http.Header // sent as they are
}

func envelope(id string, data string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":"order.created","version":1,"data":%s}`, id, data)
}

func (f *fixture) send(t *testing.T, r request) (*http.Response, map[string]string) {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.keyID == "" {
		r.keyID, r.secret = "key-a", secretA
	}
	if r.at.IsZero() {
		r.at = time.Now()
	}
	h := http.Header{}
	if r.idemKey != "" {
		h.Set(webhook.HeaderIdempotencyKey, r.idemKey)
	}
	if !r.unsigned {
		webhook.Sign(h, r.keyID, r.secret, r.at, r.body)
	}
	body := r.body
	if r.tamper != nil {
		body = r.tamper(h, body)
	}
	req, err := http.NewRequestWithContext(t.Context(), r.method, f.srv.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	for k, v := range r.headers {
		req.Header[k] = v
	}
	res, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]string
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("response %d is not JSON: %q", res.StatusCode, raw)
	}
	return res, out
}

func (f *fixture) receipts(t *testing.T) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), "SELECT count(*) FROM pginbox_receipts_live").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) snapshot(t *testing.T) string {
	t.Helper()
	var s string
	if err := f.pool.QueryRow(context.Background(), "SELECT coalesce(jsonb_agg(to_jsonb(r) ORDER BY id)::text, '') FROM pginbox_receipts_live r").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func wantStatus(t *testing.T, res *http.Response, body map[string]string, status int, code string) {
	t.Helper()
	if res.StatusCode != status || body["code"] != code {
		t.Fatalf("got %d %v, want %d code %q", res.StatusCode, body, status, code)
	}
	if status >= 400 && body["error"] == "" {
		t.Fatalf("%d without an error text: %v", status, body)
	}
}

func TestAcceptedThenDuplicate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, nil)
	body := envelope("evt-1", `{"orderId":"o-1"}`)

	res, out := f.send(t, request{body: body})
	if res.StatusCode != http.StatusAccepted || out["outcome"] != "accepted" || out["status"] != "PENDING" || res.Header.Get(webhook.HeaderOutcome) != "accepted" {
		t.Fatalf("first delivery: %d %v", res.StatusCode, out)
	}
	// A redelivery of the same event (signed anew, as senders retry).
	res2, out2 := f.send(t, request{body: body})
	if res2.StatusCode != http.StatusOK || out2["outcome"] != "duplicate" || out2["receipt"] != out["receipt"] || res2.Header.Get(webhook.HeaderOutcome) != "duplicate" {
		t.Fatalf("redelivery: %d %v, want 200 duplicate of %s", res2.StatusCode, out2, out["receipt"])
	}
	if n := f.receipts(t); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}
	if s := f.h.Stats(); s != (webhook.Stats{Acked: 2}) {
		t.Fatalf("stats %+v, want 2 acked", s)
	}
}

// The tenant is the key's, whatever Decode or the body say.
func TestTenantComesFromTheKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, func(c *webhook.Config) {
		env := webhook.Envelope("shop", "orders.projection.v1")
		c.Decode = func(body []byte, h http.Header) (inbox.Message, error) {
			m, err := env(body, h)
			m.Scope = inbox.Tenant("tenant-from-body") // a careless decoder
			return m, err
		}
	})
	for _, k := range []struct {
		id     string
		secret []byte
	}{{"key-a", secretA}, {"key-b", secretB}} {
		res, out := f.send(t, request{keyID: k.id, secret: k.secret, body: envelope("evt-same", `{"orderId":"o-1"}`)})
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: %d %v", k.id, res.StatusCode, out)
		}
	}
	rows, err := f.pool.Query(context.Background(), "SELECT scope_id FROM pginbox_receipts_live ORDER BY scope_id")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if rows.Err() != nil || strings.Join(got, ",") != "tenant-a,tenant-b" {
		t.Fatalf("scopes %v (%v), want one receipt per key's tenant", got, rows.Err())
	}
}

func TestRefusedRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, func(c *webhook.Config) { c.MaxBodyBytes = 1024 })
	body := envelope("evt-1", `{"orderId":"o-1"}`)
	tests := []struct {
		name   string
		req    request
		status int
		code   string
	}{
		{"GET", request{method: http.MethodGet, body: body}, http.StatusMethodNotAllowed, "method_not_allowed"},
		{"unsigned", request{body: body, unsigned: true}, http.StatusUnauthorized, "unauthorized"},
		{"unknown key", request{keyID: "key-x", secret: secretA, body: body}, http.StatusUnauthorized, "unauthorized"},
		{"another key's secret", request{keyID: "key-b", secret: secretA, body: body}, http.StatusUnauthorized, "unauthorized"},
		{"forged signature", request{keyID: "key-a", secret: []byte("guessed-secret-guessed-secret!!"), body: body}, http.StatusUnauthorized, "unauthorized"},
		{"replayed after the tolerance", request{body: body, at: time.Now().Add(-6 * time.Minute)}, http.StatusUnauthorized, "unauthorized"},
		{"timestamp in the future", request{body: body, at: time.Now().Add(6 * time.Minute)}, http.StatusUnauthorized, "unauthorized"},
		{"timestamp not a number", request{body: body, tamper: func(h http.Header, b []byte) []byte {
			h.Set(webhook.HeaderTimestamp, "yesterday")
			return b
		}}, http.StatusUnauthorized, "unauthorized"},
		{"timestamp changed after signing", request{body: body, tamper: func(h http.Header, b []byte) []byte {
			h.Set(webhook.HeaderTimestamp, fmt.Sprint(time.Now().Unix()+1))
			return b
		}}, http.StatusUnauthorized, "unauthorized"},
		{"body changed after signing", request{body: body, tamper: func(_ http.Header, b []byte) []byte {
			return bytes.Replace(b, []byte("o-1"), []byte("o-2"), 1)
		}}, http.StatusUnauthorized, "unauthorized"},
		{"idempotency key added after signing", request{body: body, tamper: func(h http.Header, b []byte) []byte {
			h.Set(webhook.HeaderIdempotencyKey, "other")
			return b
		}}, http.StatusUnauthorized, "unauthorized"},
		{"signature not hex", request{body: body, tamper: func(h http.Header, b []byte) []byte {
			h.Set(webhook.HeaderSignature, "v1=zz")
			return b
		}}, http.StatusUnauthorized, "unauthorized"},
		{"signature without version", request{body: body, tamper: func(h http.Header, b []byte) []byte {
			h.Set(webhook.HeaderSignature, strings.TrimPrefix(h.Get(webhook.HeaderSignature), "v1="))
			return b
		}}, http.StatusUnauthorized, "unauthorized"},
		{"oversized", request{body: envelope("evt-big", `"`+strings.Repeat("x", 2000)+`"`)}, http.StatusRequestEntityTooLarge, "body_too_large"},
		{"not an envelope", request{body: []byte(`{"orderId":"o-1"}`)}, http.StatusBadRequest, "bad_request"},
		{"no data", request{body: []byte(`{"id":"evt-1","type":"order.created"}`)}, http.StatusBadRequest, "bad_request"},
		{"invalid payload", request{body: envelope("evt-dup-key", `{"a":1,"a":2}`)}, http.StatusUnprocessableEntity, "invalid"},
		{"missing message ID", request{body: envelope("", `{"orderId":"o-1"}`)}, http.StatusUnprocessableEntity, "invalid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, out := f.send(t, tc.req)
			wantStatus(t, res, out, tc.status, tc.code)
			if tc.status == http.StatusMethodNotAllowed && res.Header.Get("Allow") != http.MethodPost {
				t.Fatalf("405 without Allow: POST")
			}
		})
	}
	if n := f.receipts(t); n != 0 {
		t.Fatalf("refused requests stored %d receipts", n)
	}
	if s := f.h.Stats(); s != (webhook.Stats{Rejected: int64(len(tests))}) {
		t.Fatalf("stats %+v, want %d rejected", s, len(tests))
	}
}

// A captured request sent again within the tolerance verifies, and the inbox
// makes it a duplicate: replaying cannot apply an event twice.
func TestReplayWithinToleranceIsDuplicate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, nil)
	body := envelope("evt-1", `{"orderId":"o-1"}`)
	at := time.Now().Add(-time.Minute)
	if res, out := f.send(t, request{body: body, at: at}); res.StatusCode != http.StatusAccepted {
		t.Fatalf("original: %d %v", res.StatusCode, out)
	}
	for range 3 {
		if res, out := f.send(t, request{body: body, at: at}); res.StatusCode != http.StatusOK || out["outcome"] != "duplicate" {
			t.Fatalf("replay: %d %v, want 200 duplicate", res.StatusCode, out)
		}
	}
	if n := f.receipts(t); n != 1 {
		t.Fatalf("%d receipts after replays, want 1", n)
	}
}

func TestConflictLeavesReceiptUnchanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, nil)
	if res, out := f.send(t, request{body: envelope("evt-1", `{"total":"10.00"}`)}); res.StatusCode != http.StatusAccepted {
		t.Fatalf("first: %d %v", res.StatusCode, out)
	}
	before := f.snapshot(t)
	res, out := f.send(t, request{body: envelope("evt-1", `{"total":"99.00"}`)})
	wantStatus(t, res, out, http.StatusConflict, "conflict")
	if !strings.Contains(out["error"], inbox.CodeIdentityConflict) {
		t.Fatalf("409 does not name the conflict: %v", out)
	}
	if after := f.snapshot(t); after != before {
		t.Fatalf("conflict changed the stored receipt:\n%s\n%s", before, after)
	}
}

// With PostgreSQL unreachable the sender gets 503 with Retry-After, and its
// retry after the database is back is accepted once.
func TestStorageDownIs503(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, address := pgconn.NetworkAddress(cfg.Host, cfg.Port)
	proxy, err := faultproxy.New(network, address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	pool := testPool(t, dsn, func(c *pgxpool.Config) {
		c.ConnConfig.Host, c.ConnConfig.Port, c.ConnConfig.Fallbacks = "127.0.0.1", proxy.Port(), nil
		c.ConnConfig.ConnectTimeout = 2 * time.Second
	})
	f := newFixture(t, pool, func(c *webhook.Config) { c.RetryAfter = 1500 * time.Millisecond })
	body := envelope("evt-1", `{"orderId":"o-1"}`)

	proxy.Refuse()
	proxy.Cut()
	res, out := f.send(t, request{body: body})
	wantStatus(t, res, out, http.StatusServiceUnavailable, "unavailable")
	if ra := res.Header.Get("Retry-After"); ra != "2" {
		t.Fatalf("Retry-After %q, want 2 (1.5s rounded up)", ra)
	}
	proxy.Resume()
	if res, out := f.send(t, request{body: body}); res.StatusCode != http.StatusAccepted {
		t.Fatalf("retry after recovery: %d %v", res.StatusCode, out)
	}
	if res, out := f.send(t, request{body: body}); res.StatusCode != http.StatusOK {
		t.Fatalf("second retry: %d %v", res.StatusCode, out)
	}
	if s := f.h.Stats(); s != (webhook.Stats{Acked: 2, Retries: 1}) {
		t.Fatalf("stats %+v, want 2 acked and 1 retry", s)
	}
}

// The idempotency variant: the header is the message ID, and the inbox is the
// memory. A brand-new handler (as after a restart, with every response cache
// gone) still answers a retry as a duplicate.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	pool := testPool(t, testDSN(t), nil)
	idem := func(c *webhook.Config) { c.IdempotencyKey = true }
	f := newFixture(t, pool, idem)
	body := envelope("", `{"orderId":"o-1"}`) // no ID in the body

	res, out := f.send(t, request{body: body})
	wantStatus(t, res, out, http.StatusBadRequest, "bad_request")
	if !strings.Contains(out["error"], webhook.HeaderIdempotencyKey) {
		t.Fatalf("400 does not name the missing header: %v", out)
	}

	res, first := f.send(t, request{body: body, idemKey: "idem-1"})
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("first: %d %v", res.StatusCode, first)
	}
	var msgID string
	if err := pool.QueryRow(context.Background(), "SELECT message_id FROM pginbox_receipts_live").Scan(&msgID); err != nil || msgID != "idem-1" {
		t.Fatalf("message ID %q (%v), want the Idempotency-Key", msgID, err)
	}

	restarted := newFixture(t, pool, idem)
	res, again := restarted.send(t, request{body: body, idemKey: "idem-1"})
	if res.StatusCode != http.StatusOK || again["outcome"] != "duplicate" || again["receipt"] != first["receipt"] {
		t.Fatalf("retry on a new handler: %d %v, want 200 duplicate of %s", res.StatusCode, again, first["receipt"])
	}
	res, out = restarted.send(t, request{body: envelope("", `{"orderId":"o-2"}`), idemKey: "idem-1"})
	wantStatus(t, res, out, http.StatusConflict, "conflict")
	if n := restarted.receipts(t); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}
}

func TestNewHandlerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	pool := testPool(t, testDSN(t), nil)
	client, err := inbox.NewClient(pool, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dec := webhook.Envelope("s", "c")
	good := webhook.Key{ID: "k", Secret: secretA, Scope: inbox.Tenant("t")}
	tests := []struct {
		name string
		cfg  webhook.Config
		want string
	}{
		{"no keys", webhook.Config{Decode: dec}, "Config.Keys: is empty"},
		{"empty key ID", webhook.Config{Decode: dec, Keys: []webhook.Key{{Secret: secretA, Scope: inbox.Global()}}}, "Keys[0].ID: is empty"},
		{"duplicate key ID", webhook.Config{Decode: dec, Keys: []webhook.Key{good, good}}, `Keys[1].ID: "k" is used twice`},
		{"short secret", webhook.Config{Decode: dec, Keys: []webhook.Key{{ID: "k", Secret: []byte("short"), Scope: inbox.Global()}}}, "Keys[0].Secret: has 5 bytes"},
		{"no scope", webhook.Config{Decode: dec, Keys: []webhook.Key{{ID: "k", Secret: secretA}}}, "Keys[0].Scope: is unset"},
		{"empty tenant", webhook.Config{Decode: dec, Keys: []webhook.Key{{ID: "k", Secret: secretA, Scope: inbox.Tenant("")}}}, "empty tenant ID"},
		{"no decode", webhook.Config{Keys: []webhook.Key{good}}, "Config.Decode: is nil"},
		{"negative tolerance", webhook.Config{Decode: dec, Keys: []webhook.Key{good}, Tolerance: -time.Second}, "Config.Tolerance"},
		{"negative body limit", webhook.Config{Decode: dec, Keys: []webhook.Key{good}, MaxBodyBytes: -1}, "Config.MaxBodyBytes"},
		{"negative retry-after", webhook.Config{Decode: dec, Keys: []webhook.Key{good}, RetryAfter: -time.Second}, "Config.RetryAfter"},
		{"bad metadata header", webhook.Config{Decode: dec, Keys: []webhook.Key{good}, MetadataHeaders: []string{"traceparent", "trace parent"}}, `Config.MetadataHeaders[1]: "trace parent" is not a header name`},
	}
	for _, tc := range tests {
		if _, err := webhook.NewHandler(client, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := webhook.NewHandler(nil, webhook.Config{Decode: dec, Keys: []webhook.Key{good}}); err == nil {
		t.Error("NewHandler accepted a nil accepter")
	}
}

// MetadataHeaders copies the sender's trace headers into the stored
// metadata (lower-cased), never over what Decode set, and nothing else.
func TestMetadataHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, func(c *webhook.Config) {
		env := c.Decode
		c.Decode = func(body []byte, h http.Header) (inbox.Message, error) {
			m, err := env(body, h)
			m.Metadata = map[string]string{"tracestate": "vendor=decoded"}
			return m, err
		}
		c.MetadataHeaders = webhook.TraceHeaders
	})
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	res, out := f.send(t, request{body: envelope("evt-1", `{"orderId":"o-1"}`), headers: http.Header{
		"Traceparent": {tp}, "Tracestate": {"vendor=header"}, "X-Other": {"no"},
	}})
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %v", res.StatusCode, out)
	}
	var md map[string]string
	if err := f.pool.QueryRow(context.Background(), "SELECT metadata FROM pginbox_receipts").Scan(&md); err != nil {
		t.Fatal(err)
	}
	if len(md) != 2 || md["traceparent"] != tp || md["tracestate"] != "vendor=decoded" {
		t.Errorf("metadata %v, want the traceparent header and Decode's tracestate", md)
	}
}
