package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/console"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/internal/testkit"
)

// EnvScreenshotDir names a directory that receives a copy of every
// screenshot (make screenshots points it at docs/console).
const EnvScreenshotDir = "INBOX_SCREENSHOT_DIR"

// EnvChrome names the browser binary to use instead of looking one up.
const EnvChrome = "INBOX_TEST_CHROME"

const (
	orders   = "orders.projection.v1"
	billing  = "billing.invoices.v1"
	shipping = "shipping.labels.v1"
	actor    = "oncall@example.com"
	// hostile is a currency that ends up in a payload and in an error text.
	hostile = `<img src=x onerror=alert(document.domain)>`
)

// findBrowser returns the Chromium binary. Without one the test is skipped
// outside CI and fails in CI (CI=true), which must install it.
func findBrowser(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(EnvChrome); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("browsertest: no Chromium found on PATH; CI must install it (apt-get install chromium) or set %s", EnvChrome)
	}
	t.Skipf("browsertest: skipping: no Chromium found; install it (apt-get install chromium) or set %s to its path", EnvChrome)
	return ""
}

type order struct {
	OrderID  string `json:"orderId"`
	Currency string `json:"currency"`
	Total    string `json:"total"`
}

// shop is the scenario: orders a projection handles (some fail until
// "fixed"), and invoices that no running worker owns.
type shop struct {
	pool    *pgxpool.Pool
	client  *inbox.Client
	worker  *inbox.Worker
	healthy atomic.Bool // the fix is deployed: every order succeeds
}

func newShop(t *testing.T, pool *pgxpool.Pool) *shop {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	s := &shop{pool: pool}
	var err error
	if s.client, err = inbox.NewClient(pool, inbox.Config{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	reg := handler.NewRegistry()
	err = reg.Register(handler.Key{Consumer: orders, EventType: "order.placed", SchemaVersion: 1}, func(ctx context.Context, m *handler.Msg) error {
		var o order
		if err := json.Unmarshal(m.Payload, &o); err != nil {
			return handler.Permanent(err)
		}
		switch {
		case s.healthy.Load():
			return nil
		case o.OrderID == "o-1007":
			return errors.New("payment service: timed out after 5s")
		case o.Currency != "EUR":
			return handler.Permanent(fmt.Errorf("unsupported currency %s: add it to the currency table", o.Currency))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every parcel fails, each with its own numbers: one error shape.
	err = reg.Register(handler.Key{Consumer: shipping, EventType: "parcel.booked", SchemaVersion: 1}, func(ctx context.Context, m *handler.Msg) error {
		var p struct{ ParcelID, Postcode string }
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			return handler.Permanent(err)
		}
		return handler.Permanent(fmt.Errorf("carrier rejected parcel %s: postcode %s is not served", p.ParcelID, p.Postcode))
	})
	if err != nil {
		t.Fatal(err)
	}
	s.worker, err = inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Consumers:    []string{orders, shipping},
		Concurrency:  2,
		PollInterval: 200 * time.Millisecond,
		// A retry stays RETRYABLE for the whole test.
		Backoff: func(int) time.Duration { return time.Hour },
		Logger:  quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *shop) accept(t *testing.T, consumer, eventType, msgID string, payload any, md map[string]string) inbox.ID {
	t.Helper()
	res, err := s.client.Accept(t.Context(), inbox.Message{
		Identity:  inbox.Identity{Scope: inbox.Tenant("acme"), Source: "checkout", Consumer: consumer, MessageID: msgID},
		EventType: eventType, SchemaVersion: 1,
		Payload: payload, Metadata: md,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// seed accepts the scenario's messages and lets the (still broken) worker
// handle the orders once: 5 COMPLETED, 4 DEAD (three of one error), 1
// RETRYABLE; 2 parcels DEAD with errors of one shape; and 4 invoices PENDING
// for 12 minutes.
func (s *shop) seed(t *testing.T) {
	t.Helper()
	currencies := map[int]string{1003: "XTS", 1005: "XTS", 1008: "XTS", 1009: hostile}
	for n := 1001; n <= 1010; n++ {
		cur := currencies[n]
		if cur == "" {
			cur = "EUR"
		}
		id := fmt.Sprintf("o-%d", n)
		s.accept(t, orders, "order.placed", "evt-"+id, order{OrderID: id, Currency: cur, Total: fmt.Sprintf("%d.90", n%97)},
			map[string]string{"delivery": "rabbitmq", "traceparent": fmt.Sprintf("00-4bf92f3577b34da6a3ce929d0e0e%04d-00f067aa0ba902b7-01", n)})
	}
	for i, postcode := range []string{"75001", "10115"} {
		s.accept(t, shipping, "parcel.booked", fmt.Sprintf("evt-p-%d", 301+i), map[string]string{"parcelId": fmt.Sprintf("p-%d", 301+i), "postcode": postcode}, nil)
	}
	if n := inboxtest.Drain(t, s.worker); n != 12 {
		t.Fatalf("drained %d orders and parcels, want 12", n)
	}
	for n := 2001; n <= 2004; n++ {
		s.accept(t, billing, "invoice.requested", fmt.Sprintf("evt-i-%d", n), map[string]string{"invoiceId": fmt.Sprintf("i-%d", n)}, nil)
	}
	// Two orders completed long ago, for purge.
	if _, err := s.pool.Exec(t.Context(), "UPDATE pginbox_receipts SET completed_at = now() - interval '40 days', created_at = now() - interval '40 days' WHERE message_id IN ('evt-o-1001', 'evt-o-1002')"); err != nil {
		t.Fatal(err)
	}
	// A backlog that has waited a while, as on a real bad day.
	for _, q := range []string{
		"UPDATE pginbox_work SET available_at = now() - interval '12 minutes' WHERE consumer = $1",
		"UPDATE pginbox_receipts SET created_at = now() - interval '12 minutes' WHERE consumer = $1",
	} {
		if _, err := s.pool.Exec(t.Context(), q, billing); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConsoleInBrowser walks the on-call path in headless Chromium: the
// overview, the receipt list, the DEAD view, a DEAD receipt, its requeue, and
// a worker completing it while the overview refreshes itself. Every page is
// also read with JavaScript off. Screenshots go to the test's artifact
// directory and, when INBOX_SCREENSHOT_DIR is set, there.
func TestConsoleInBrowser(t *testing.T) {
	browser := findBrowser(t)
	pool := newPool(t)
	s := newShop(t, pool)
	s.seed(t)

	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := console.New(admin, console.Config{
		LocalActor:      actor,
		RefreshInterval: time.Second,
		Logger:          slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h) // loopback only
	t.Cleanup(srv.Close)

	b := newBrowserSession(t, browser)

	// The overview: numbers per consumer, totals on top.
	b.do("open the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#live table")))
	b.wantText("#n-dead", "6")
	b.wantText("#n-retrying", "1")
	b.wantText("#n-due", "4")
	b.wantText("#n-oldest", " min") // the invoices have waited 12 minutes
	b.screenshot("overview")
	// Keyboard users land on the skip link first.
	b.do("press Tab", chromedp.KeyEvent(kb.Tab))
	if got := b.eval(`document.activeElement.textContent`); got != "Skip to content" {
		t.Fatalf("first Tab focuses %q, want the skip link", got)
	}
	// A phone-sized screen.
	b.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#live table")))
	b.screenshot("overview-phone")
	b.do("desktop viewport", chromedp.EmulateViewport(1280, 900), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#live table")))

	// The list, filtered like `inbox list --consumer`.
	b.do("open the list", chromedp.Navigate(srv.URL+"/receipts?consumer="+orders), chromedp.WaitVisible(chromedp.CSS("table.data")))
	if n := b.eval(`String(document.querySelectorAll("table.data tbody tr").length)`); n != "10" {
		t.Fatalf("list shows %s rows, want 10", n)
	}
	b.screenshot("list")
	b.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("table.data")))
	b.screenshot("list-phone")
	b.do("desktop viewport", chromedp.EmulateViewport(1280, 900), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("table.data")))

	// The DEAD view: the XTS group first; the parcels are one group of their
	// error's shape, with the exact texts a click away; the hostile error is
	// text, not markup.
	b.do("open the dead view", chromedp.Navigate(srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS("ol.groups")))
	b.wantText("ol.groups > li:first-child .group-n strong", "3")
	b.wantText("ol.groups > li:first-child pre", "unsupported currency XTS: add it to the currency table")
	b.wantText("ol.groups > li:nth-child(2) .group-n strong", "2")
	b.wantText("ol.groups > li:nth-child(2) pre.shape", "carrier rejected parcel p-<n>: postcode <n> is not served")
	b.do("open the parcels' exact texts", chromedp.Click(chromedp.CSS("ol.groups > li:nth-child(2) details.exact summary")),
		chromedp.WaitVisible(chromedp.CSS("ol.groups > li:nth-child(2) details.exact li pre")))
	b.wantText("ol.groups > li:nth-child(2) details.exact", "carrier rejected parcel p-302: postcode 10115 is not served")
	b.wantText("ol.groups > li:nth-child(2) details.exact", "carrier rejected parcel p-301: postcode 75001 is not served")
	if got := b.eval(`String(document.querySelectorAll("main img").length) + " " + document.querySelector("ol.groups").textContent.includes(` + jsString(hostile) + `)`); got != "0 true" {
		t.Fatalf("hostile error text: images and text shown = %q, want 0 images and the text", got)
	}
	b.screenshot("dead")

	// Open a DEAD receipt of the XTS group.
	b.do("open a dead receipt", chromedp.Click(chromedp.CSS("ol.groups > li:first-child p.sub a.mono")), chromedp.WaitVisible(chromedp.ID("reason")))
	b.wantText("h1 .badge", "DEAD")
	b.wantText("pre.error-text", "unsupported currency XTS")
	var id inbox.ID
	if err := id.UnmarshalText([]byte(b.text("h1 .mono"))); err != nil {
		t.Fatal(err)
	}
	b.screenshot("receipt")

	// Another DEAD receipt changes while its page is open (another operator
	// acted): the requeue is refused with what changed, and nothing happens.
	b.do("open another dead receipt", chromedp.Navigate(srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS("ol.groups")),
		chromedp.Click(chromedp.CSS("ol.groups > li:first-child p.sub a.mono:last-child")), chromedp.WaitVisible(chromedp.ID("reason")))
	var other inbox.ID
	if err := other.UnmarshalText([]byte(b.text("h1 .mono"))); err != nil {
		t.Fatal(err)
	}
	if other == id {
		t.Fatal("the group's first and last sample are the same receipt")
	}
	if _, err := pool.Exec(t.Context(), "UPDATE pginbox_work SET version = version + 1 WHERE receipt_id = $1", other); err != nil {
		t.Fatal(err)
	}
	b.expect("/requeue:1 Failed to load resource: the server responded with a status of 409 (Conflict)")
	b.do("requeue a stale page", chromedp.SendKeys(chromedp.ID("reason"), "retry"),
		chromedp.Click(chromedp.CSS(`form[action$="/requeue"] button`)), chromedp.WaitVisible(chromedp.CSS(".alert")))
	b.wantText(".alert", "You acted on version 3 of this receipt, but it is now at version 4")
	b.wantText(".alert", "It is still DEAD")
	b.wantText("h1 .badge", "DEAD")
	b.screenshot("conflict")
	inboxtest.WaitForStatus(t, pool, other, inbox.StatusDead, 0)

	// Back to the first one.
	b.do("open the first dead receipt again", chromedp.Navigate(srv.URL+"/receipts/"+id.String()), chromedp.WaitVisible(chromedp.ID("reason")))

	// Requeue it with a reason; the page confirms and the audit trail has the actor.
	b.do("requeue", chromedp.SendKeys(chromedp.ID("reason"), "XTS added to the currency table (INC-4711)"),
		chromedp.Click(chromedp.CSS(`form[action$="/requeue"] button`)), chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.wantText(".notice", "Requeued")
	b.wantText("h1 .badge", "PENDING")
	b.wantText("section[aria-labelledby=h-audit] tbody", actor)
	inboxtest.WaitForStatus(t, pool, id, inbox.StatusPending, 0)

	// The overview sees it due; then the fixed worker completes it and the
	// overview updates by itself (no reload: the marker survives).
	b.do("open the overview again", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#live table")))
	b.wantText("#n-dead", "5")
	b.wantText("#n-due", "5")
	b.eval(`window.pginboxMarker = "same page"`)
	s.healthy.Store(true)
	if err := s.worker.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.worker.Stop(context.Background()) })
	inboxtest.WaitForStatus(t, pool, id, inbox.StatusCompleted, 30*time.Second)
	b.do("watch the overview update", chromedp.Poll[chromedp.Void](`document.getElementById("n-due").textContent.trim() === "4"`, chromedp.WithPollingTimeout(30*time.Second)))
	if got := b.eval(`String(window.pginboxMarker)`); got != "same page" {
		t.Fatalf("the overview reloaded instead of refreshing in place (marker %q)", got)
	}
	b.wantText("#n-dead", "5")

	b.do("open the completed receipt", chromedp.Navigate(srv.URL+"/receipts/"+id.String()), chromedp.WaitVisible(chromedp.CSS("h1 .badge")))
	b.wantText("h1 .badge", "COMPLETED")
	b.wantText("section[aria-labelledby=h-audit] tbody", "XTS added to the currency table (INC-4711)")
	b.screenshot("receipt-requeued")

	// Purge: the dry run counts the two old completions; confirming purges them.
	b.do("purge dry run", chromedp.Navigate(srv.URL+"/purge"), chromedp.WaitVisible(chromedp.ID("older-than")),
		chromedp.Click(chromedp.CSS(`form[method="get"] button`)), chromedp.WaitVisible(chromedp.ID("h-dry")))
	b.wantText(".dry", "2 receipts completed before")
	b.screenshot("purge")
	b.do("purge", chromedp.Click(chromedp.CSS("button.danger")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.wantText(".notice", "Purged the payloads of 2 receipts")
	var purged int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM pginbox_receipts_live WHERE payload IS NULL").Scan(&purged); err != nil || purged != 2 {
		t.Fatalf("%d payloads purged (%v), want 2", purged, err)
	}

	// Every read works without JavaScript.
	b.do("turn JavaScript off", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}))
	for _, read := range []struct{ path, sel, text string }{
		{"/", "#n-dead", "5"},
		{"/receipts?status=DEAD", "table.data tbody tr", "unsupported currency XTS"},
		{"/dead", "ol.groups .group-n", "3"},
		{"/receipts/" + id.String(), "h1 .badge", "COMPLETED"},
		{"/purge?older_than=1h", "#h-dry", "Dry run"},
	} {
		b.do("read "+read.path+" without JavaScript", chromedp.Navigate(srv.URL+read.path), chromedp.WaitVisible(chromedp.CSS(read.sel)))
		b.wantText("main", read.text)
	}

	b.checkConsole()
}

// browserSession is one headless Chromium tab, with what the page said.
type browserSession struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	expected []string // console errors a step provokes on purpose
	messages []string // console errors, CSP violations, exceptions
	dialogs  []string // alert/confirm/prompt: only injected script opens them
	barriers int      // checkConsole's own messages read so far
}

// barrierMark starts the console message checkConsole logs itself.
const barrierMark = "pginbox browsertest barrier"

func newBrowserSession(t *testing.T, path string) *browserSession {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium's sandbox refuses root
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	b := &browserSession{t: t, ctx: ctx}
	messages := chromedp.Console(ctx)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if strings.HasPrefix(m.Text, barrierMark) {
				b.mu.Lock()
				b.barriers++
				b.mu.Unlock()
				continue
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || strings.Contains(m.Text, "Content Security Policy") {
				msg := fmt.Sprintf("%s %s:%d %s", m.Type, m.URL, m.Line+1, m.Text)
				b.mu.Lock()
				if !slices.ContainsFunc(b.expected, func(e string) bool { return strings.Contains(msg, e) }) {
					b.messages = append(b.messages, msg)
				}
				b.mu.Unlock()
			}
		}
	}()
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev.Message)
			b.mu.Unlock()
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return b
}

// expect tells checkConsole that a console error containing msg is provoked
// on purpose (the browser logs every 4xx answer).
func (b *browserSession) expect(msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expected = append(b.expected, msg)
}

// do runs the actions of one step, bounded in time.
func (b *browserSession) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", step, err)
	}
}

func (b *browserSession) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// wantText waits briefly until the element's text contains want.
func (b *browserSession) wantText(sel, want string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	expr := fmt.Sprintf(`(document.querySelector(%s) || {innerText: ""}).innerText.includes(%s)`, jsString(sel), jsString(want))
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		b.t.Fatalf("%s: text %q does not contain %q (%v)", sel, b.text(sel), want, err)
	}
}

func (b *browserSession) eval(expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// docsShots are the screenshots that go to $INBOX_SCREENSHOT_DIR (the
// committed ones under docs/console); the others stay with the test run.
var docsShots = map[string]bool{"overview": true, "overview-phone": true, "list": true, "dead": true, "receipt": true, "receipt-requeued": true, "receipt-skip": true}

// screenshot saves the whole page as name.png in the test's artifact
// directory and, for docsShots, in $INBOX_SCREENSHOT_DIR when set.
func (b *browserSession) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{b.t.ArtifactDir()}
	if d := os.Getenv(EnvScreenshotDir); d != "" && docsShots[name] {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.t.Fatal(err)
		}
		p := filepath.Join(dir, name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			b.t.Fatal(err)
		}
		b.t.Logf("screenshot %s", p)
	}
}

// checkConsole fails the test if a page logged an error (a CSP violation, a
// failed asset, an exception) or opened a dialog.
func (b *browserSession) checkConsole() {
	b.t.Helper()
	// A message of its own after whatever the pages logged: once the reader
	// has it, it has every message before it. A dialog blocks the page, so
	// the call returns once any was recorded and dismissed.
	b.mu.Lock()
	seen := b.barriers
	b.mu.Unlock()
	b.eval("console.error(" + jsString(barrierMark) + ")")
	testkit.Eventually(b.t, 15*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.barriers > seen
	}, "the console's barrier message")
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.messages {
		b.t.Errorf("browser console: %s", m)
	}
	for _, d := range b.dialogs {
		b.t.Errorf("a page opened a dialog (injected script ran): %q", d)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
