package browsertest

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/pginbox/pginbox/console"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// TestConsoleHostileNames opens every page in headless Chromium with the
// names a careless or hostile producer can send: 255 bytes without a break,
// and bidirectional overrides that would reorder what the operator reads;
// and the 400 pages of filters refused for 5,000 bytes without a break. No
// page may scroll sideways, the counts must stay on screen, and the overrides
// must show as escapes.
func TestConsoleHostileNames(t *testing.T) {
	browser := findBrowser(t)
	pool := newPool(t)
	client, err := inbox.NewClient(pool, inbox.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	long := "orders." + strings.Repeat("x", inbox.MaxIdentityBytes-len("orders."))
	source := strings.Repeat("s", inbox.MaxIdentityBytes)
	var ids []inbox.ID
	for i := range 6 {
		res, err := client.Accept(t.Context(), inbox.Message{
			Identity: inbox.Identity{Scope: inbox.Tenant(strings.Repeat("t", 200)), Source: source, Consumer: long,
				MessageID: fmt.Sprintf("\u202eevt-%04d", i)}, // "evt-0011" would show as "1100-tve"
			EventType: "order.placed", SchemaVersion: 1,
			Payload:  map[string]string{"note": strings.Repeat("p", 400)},
			Metadata: map[string]string{strings.Repeat("k", 120): strings.Repeat("v", 300)},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
		// Errors that differ only in the IDs they name: one group.
		inboxtest.SetState(t, pool, res.ID, "status = 'DEAD', attempts = 3, last_error = $2",
			fmt.Sprintf("order %d: customer %s blocked: %s", 4711+i, strings.Repeat("z", 300), "\u202egnp.exe"))
	}

	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := console.New(admin, console.Config{LocalActor: actor, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b := newBrowserSession(t, browser)

	pages := []struct {
		path, ready string
		bidi        bool // shows a message ID or an error
	}{
		{"/", "#live table", false},
		{"/receipts", "table.data", true},
		{"/receipts?consumer=" + url.QueryEscape(long), "table.data", true},
		{"/dead", "ol.groups", true},
		{"/dead?consumer=" + url.QueryEscape(long), "ol.groups", true},
		{"/receipts/" + ids[0].String(), "h1 .badge", true},
	}
	// Refused values of 5,000 bytes without a break: each page answers 400.
	huge := url.QueryEscape(strings.Repeat("x", 5000))
	rejected := []string{"/receipts?consumer=" + huge, "/receipts?since=" + huge, "/dead?consumer=" + huge, "/purge?older_than=" + huge}
	b.expect("the server responded with a status of 400 (Bad Request)")
	for _, vp := range []struct {
		name  string
		width int
		set   chromedp.Action[chromedp.Void]
	}{
		{"desktop", 1280, chromedp.EmulateViewport(1280, 900)},
		{"phone", 390, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)},
	} {
		b.do(vp.name+" viewport", vp.set)
		for i, p := range pages {
			step := vp.name + " " + p.path[:min(len(p.path), 30)]
			b.do("open "+step, chromedp.Navigate(srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			// The page does not scroll sideways, and no table needs to.
			if got := b.eval(overflowJS); got != "" {
				t.Errorf("%s: too wide: %s", step, got)
			}
			// The overrides show as escapes, never raw.
			b.screenshot(fmt.Sprintf("hostile-%s-%d", vp.name, i))
			want := fmt.Sprintf("false %v", p.bidi)
			if got := b.eval(`document.body.innerText.includes("\u202e") + " " + document.body.innerText.includes("\\u202e")`); got != want {
				t.Errorf("%s: raw U+202E shown, escaped shown = %s; want %s", step, got, want)
			}
		}
		// A refused filter's page repeats the value cut, and still fits.
		for _, path := range rejected {
			step := vp.name + " 400 " + path[:min(len(path), 30)]
			b.do("open "+step, chromedp.Navigate(srv.URL+path), chromedp.WaitVisible(chromedp.CSS(".alert")))
			// Against the width set: a phone's innerWidth grows with the page.
			if got := b.eval(`document.documentElement.scrollWidth`); atoi(got) < 0 || atoi(got) > vp.width {
				t.Errorf("%s: page scrollWidth %s px in a %d px viewport (%s)", step, got, vp.width, b.eval(overflowJS))
			}
			b.wantText(".alert", "(5000 bytes)")
		}
		// The counts stay on screen.
		b.do("open the dead view", chromedp.Navigate(srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS("ol.groups")))
		b.wantText("main > p strong", "6")
		b.wantText("ol.groups > li:first-child .group-n strong", "6")
		b.wantText("ol.groups > li:first-child .shape-note", "6 different texts of one shape")
		if got := b.eval(onScreenJS("ol.groups > li:first-child .group-n strong")); got != "true" {
			t.Errorf("%s: the group's count is off screen: %s", vp.name, got)
		}
		b.screenshot("dead-hostile-" + vp.name)
		// The exact texts are one click away.
		b.do("open the exact texts", chromedp.Click(chromedp.CSS("details.exact summary")),
			chromedp.WaitVisible(chromedp.CSS("details.exact li pre")))
		b.wantText("details.exact li:first-child pre", "order 4716: customer zzz")
		if got := b.eval(overflowJS); got != "" {
			t.Errorf("%s: exact texts too wide: %s", vp.name, got)
		}
		b.do("open the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#live table")))
		b.wantText("#n-dead", "6")
		for _, sel := range []string{"#n-dead", `#live tbody td[data-label="Dead"] a`} {
			if got := b.eval(onScreenJS(sel)); got != "true" {
				t.Errorf("%s overview: %s is off screen: %s", vp.name, sel, got)
			}
		}
		// The full name is there to read: in the title of a cut cell.
		if got := b.eval(`document.querySelector("#live tbody th").title.length`); got != fmt.Sprint(len(long)) {
			t.Errorf("%s overview: title of the consumer cell is %s characters, want %d", vp.name, got, len(long))
		}
		b.screenshot("overview-hostile-" + vp.name)
	}
	b.checkConsole()
}

// atoi reads a number eval returned; -1 if it is none.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// overflowJS describes what is wider than its room: the page itself, or a
// table that scrolls inside its frame. Empty when nothing is.
const overflowJS = `(() => {
	const out = [];
	const doc = document.documentElement;
	if (doc.scrollWidth > doc.clientWidth) {
		out.push("page " + doc.scrollWidth + " px in " + doc.clientWidth);
		for (const el of document.body.querySelectorAll("*")) {
			const r = el.getBoundingClientRect();
			if (r.right > doc.clientWidth + 1 && out.length < 4) {
				out.push(el.tagName.toLowerCase() + "." + el.className + " ends at " + Math.round(r.right));
			}
		}
	}
	for (const w of document.querySelectorAll(".table-wrap")) {
		if (w.scrollWidth > w.clientWidth + 1) {
			out.push("table " + w.scrollWidth + " px in " + w.clientWidth);
		}
	}
	return out.join("; ");
})()`

// onScreenJS reports whether the element sel is shown with all of it inside
// the viewport's width.
func onScreenJS(sel string) string {
	return `(() => {
	const el = document.querySelector(` + jsString(sel) + `);
	if (!el) return "missing";
	const r = el.getBoundingClientRect();
	const ok = r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= document.documentElement.clientWidth;
	return ok ? "true" : "at " + Math.round(r.left) + ".." + Math.round(r.right) + " of " + document.documentElement.clientWidth;
})()`
}
