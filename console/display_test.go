package console_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/pginbox/pginbox/console"
	"github.com/pginbox/pginbox/inbox"
)

// A filter with bytes no identity can have is the user's mistake: 400 with
// what is wrong with which input, never a 500 that blames the database.
func TestBadFilterBytes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := newBrowser(t, f.serve(t, console.Config{}))
	long := strings.Repeat("c", inbox.MaxIdentityBytes+1)
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/receipts?consumer=%ff%fe", http.StatusBadRequest, `consumer &#34;\xff\xfe&#34;: invalid UTF-8 at byte 0`},
		{"/receipts?source=a%00b", http.StatusBadRequest, `source &#34;a\x00b&#34;: control character U&#43;0000 at byte 1`},
		{"/receipts?consumer=" + long, http.StatusBadRequest, "consumer &#34;" + long[:64] + "&#34;… (256 bytes): at most 255 allowed"},
		{"/receipts?status=DEAD&consumer=ok&source=%c3%28", http.StatusBadRequest, `source &#34;\xc3(&#34;: invalid UTF-8 at byte 0`},
		{"/dead?consumer=%ff%fe", http.StatusBadRequest, `Consumer &#34;\xff\xfe&#34;: invalid UTF-8 at byte 0`},
		{"/dead?consumer=a%00b", http.StatusBadRequest, `Consumer &#34;a\x00b&#34;: control character U&#43;0000`},
		{"/dead?consumer=a%1b[2Jb", http.StatusBadRequest, `control character U&#43;001B`},
		{"/receipts?status=%ff", http.StatusBadRequest, `status &#34;\xff&#34;: want PENDING`},
		{"/receipts?since=a%00b", http.StatusBadRequest, `created since`},
		{"/receipts?until=%ff", http.StatusBadRequest, `created before`},
		{"/receipts?after=%ff%00", http.StatusBadRequest, `after &#34;\xff\x00&#34;: not a receipt ID`},
		{"/receipts?limit=%00", http.StatusBadRequest, `limit &#34;\x00&#34;`},
		{"/purge?older_than=%ff%00", http.StatusBadRequest, "Invalid age"},
		{"/receipts/%ff%00", http.StatusNotFound, "not a receipt ID"},
	} {
		res := b.get(tc.path)
		wantCode(t, res, tc.code)
		wantBody(t, res, tc.want)
		wantNoBody(t, res, "PostgreSQL", "SQLSTATE", "\x00", "\xff")
	}
	// The filter form keeps what was typed, and the valid filters still work.
	res := b.get("/receipts?consumer=orders.projection.v1&status=DEAD")
	wantCode(t, res, http.StatusOK)
	wantBody(t, res, f.dead.String())
}

// A rejected value is repeated in the error cut to its first 64 bytes, with
// its length: a 5,000-byte filter is not printed whole (the form's field
// keeps it, to edit). Invalid bytes show escaped, each counted as one.
func TestRejectedValueShownTruncated(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := newBrowser(t, f.serve(t, console.Config{}))
	long := strings.Repeat("c", 5000)
	cut := "&#34;" + long[:64] + "&#34;… (5000 bytes)"
	alert := regexp.MustCompile(`(?s)<div class="alert" role="alert">.*?</div>`)
	for _, tc := range []struct{ path, want string }{
		{"/receipts?consumer=" + long, "consumer " + cut + ": at most 255 allowed"},
		{"/receipts?source=" + long, "source " + cut + ": at most 255 allowed"},
		{"/dead?consumer=" + long, "Consumer " + cut + ": at most 255 allowed"},
		{"/receipts?status=" + long, "status " + cut + ": want PENDING"},
		{"/receipts?since=" + long, "created since " + cut + ": want a time"},
		{"/receipts?until=" + long, "created before " + cut + ": want a time"},
		{"/receipts?limit=" + long, "limit " + cut + ": want 1 to"},
		{"/receipts?after=" + long, "after " + cut + ": not a receipt ID"},
		{"/purge?older_than=" + long, "Older than " + cut + ":"},
		{"/receipts?consumer=" + strings.Repeat("%ff", 100), "consumer &#34;" + strings.Repeat(`\xff`, 64) + "&#34;… (100 bytes): invalid UTF-8 at byte 0"},
	} {
		res := b.get(tc.path)
		wantCode(t, res, http.StatusBadRequest)
		got := alert.FindString(res.body)
		if got == "" {
			t.Fatalf("GET %.40s: no alert on the page:\n%s", tc.path, res.body)
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("GET %.40s: alert lacks %q:\n%s", tc.path, tc.want, got)
		}
		if strings.Contains(got, long[:65]) || strings.Contains(got, strings.Repeat(`\xff`, 65)) {
			t.Errorf("GET %.40s: alert repeats more than 64 bytes of the value (%d bytes)", tc.path, len(got))
		}
		// Outside the form's fields, the page holds no more of it either.
		body := regexp.MustCompile(`value="[^"]*"`).ReplaceAllString(res.body, "")
		if strings.Contains(body, long[:65]) {
			t.Errorf("GET %.40s: page repeats more than 64 bytes of the value outside the form", tc.path)
		}
	}
}

// hostileBidi reverses what follows it on screen: "evt-\u202e1100" would
// show as "evt-0011".
const hostileBidi = "\u202e"

// Control and bidirectional characters in identities, error texts, metadata,
// payloads, audit reasons and the actor show as escapes on every page, never
// raw.
func TestControlCharactersShownEscaped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res, err := f.client.Accept(t.Context(), inbox.Message{
		Identity: inbox.Identity{Scope: inbox.Tenant("acme" + hostileBidi), Source: "shop" + hostileBidi + "gnp.exe",
			Consumer: "orders" + hostileBidi + ".v1", MessageID: "evt-" + hostileBidi + "1100"},
		EventType: "order" + hostileBidi + ".placed", SchemaVersion: 1,
		Payload:  map[string]string{"note" + hostileBidi: "abc\u2066def\u200b"},
		Metadata: map[string]string{"trace" + hostileBidi: "v\u2067"},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := res.ID
	f.set(t, id, "status = 'DEAD', version = 3, last_error = $2", "boom\x1b[2J\x1b[31m red "+hostileBidi+"txt.exe\nsecond line\x07")

	hook := func(r *http.Request) (string, console.Scope, error) {
		return "mallory" + hostileBidi + "@example.com", console.AllScopes(), nil
	}
	b := newBrowser(t, f.serve(t, console.Config{Authenticate: hook}))
	page := b.get("/receipts/" + id.String())
	token, version := formValues(t, page.body)
	act := b.post("/receipts/"+id.String()+"/requeue", url.Values{"csrf": {token}, "version": {version}, "reason": {"fixed " + hostileBidi + "it\u2069"}})
	wantCode(t, act, http.StatusSeeOther)

	raw := regexp.MustCompile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\x00-\x08\x0b-\x1f\x7f]")
	for _, path := range []string{"/", "/receipts", "/receipts?status=PENDING", "/receipts/" + id.String(),
		"/dead", "/dead?consumer=" + url.QueryEscape("orders"+hostileBidi+".v1"), "/purge?older_than=30d"} {
		res := b.get(path)
		wantCode(t, res, http.StatusOK)
		// Only what the user typed into a filter field goes back raw (in its
		// value, so the form submits it unchanged).
		body := regexp.MustCompile(`value="[^"]*"`).ReplaceAllString(res.body, "")
		if m := raw.FindString(body); m != "" {
			i := strings.Index(body, m)
			t.Errorf("%s: raw %U in the page: …%s…", path, []rune(m)[0], body[max(0, i-80):min(len(body), i+80)])
		}
		wantBody(t, res, `mallory\u202e@example.com`)
	}
	det := b.get("/receipts/" + id.String())
	wantBody(t, det,
		`<dd>tenant(acme\u202e)</dd>`,
		`<dd>shop\u202egnp.exe</dd>`,
		`<dd>orders\u202e.v1</dd>`,
		`<dd class="mono">evt-\u202e1100</dd>`,
		`<dd>order\u202e.placed v1</dd>`,
		"boom\\x1b[2J\\x1b[31m red \\u202etxt.exe\nsecond line\\a", // the last error keeps its lines
		`trace\u202e</th><td class="mono wrap">v\u2067</td>`,       // metadata
		`&#34;note\u202e&#34;: &#34;abc\u2066def\u200b&#34;`,       // the payload, as JSON escapes
		`fixed \u202eit\u2069`,                                     // the audit reason
	)
	list := b.get("/receipts")
	wantBody(t, list, `tenant(acme\u202e) · shop\u202egnp.exe · evt-\u202e1100`, `orders\u202e.v1`)
	dead := b.get("/dead?consumer=" + url.QueryEscape("orders"+hostileBidi+".v1"))
	wantBody(t, dead, `<h1 class="name">Dead receipts of orders\u202e.v1</h1>`)
}

// Errors that embed a number or an ID form one group, shown by its shape;
// the exact texts are one click away.
func TestDeadGroupsByErrorShape(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var ids []inbox.ID
	for i := range 84 {
		id := f.accept(t, inbox.Tenant("tenant-a"), fmt.Sprintf("lost-%d", i), map[string]int{"n": i}, nil)
		f.set(t, id, "status = 'DEAD', last_error = $2", fmt.Sprintf("order o-%d not found in 01JB8ZK6Q0W5T3V1S9R7P2M%03d", 5000+i, i))
		ids = append(ids, id)
	}
	b := newBrowser(t, f.serve(t, console.Config{}))
	res := b.get("/dead?consumer=orders.projection.v1")
	wantCode(t, res, http.StatusOK)
	// The fixture's two other DEAD receipts are groups of their own.
	wantBody(t, res, "<strong>86</strong> dead in <strong>3</strong> groups",
		`<strong>84</strong></span>`,
		"84 different texts of one shape",
		"order o-&lt;n&gt; not found in &lt;ulid&gt;",
		"<summary>Exact texts of the newest 5</summary>",
		fmt.Sprintf(`href="/receipts/%s">%s</a><pre class="box error-text">order o-5083 not found in 01JB8ZK6Q0W5T3V1S9R7P2M083</pre>`, ids[83], ids[83]),
		"unsupported currency XTS", // a group with one text shows that text
	)
	if n := strings.Count(res.body, `<li><a class="mono"`); n != 5 {
		t.Errorf("%d exact texts, want 5", n)
	}
}

// A long unbroken name is cut in tables with the whole name in the title;
// the receipt page shows all of it.
func TestLongNamesKeepTheirFullValue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	consumer := strings.Repeat("c", 200) + hostileBidi + strings.Repeat("d", 52)
	res, err := f.client.Accept(t.Context(), inbox.Message{
		Identity:  inbox.Identity{Scope: inbox.Global(), Source: "shop", Consumer: consumer, MessageID: strings.Repeat("m", 255)},
		EventType: "order.placed", SchemaVersion: 1, Payload: map[string]int{"n": 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	shown := html.EscapeString(strings.Repeat("c", 200) + `\u202e` + strings.Repeat("d", 52))
	b := newBrowser(t, f.serve(t, console.Config{}))
	for _, path := range []string{"/", "/receipts"} {
		page := b.get(path)
		wantBody(t, page, `title="`+shown+`"`, strings.Repeat("c", 63)+"…")
		wantNoBody(t, page, ">"+shown+"<")
	}
	wantBody(t, b.get("/receipts/"+res.ID.String()), "<dd>"+shown+"</dd>", `<dd class="mono">`+strings.Repeat("m", 255)+"</dd>")
}
