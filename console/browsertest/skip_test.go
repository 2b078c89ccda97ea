package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pginbox/pginbox/console"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

const ledger = "payments.ledger.v1"

// TestSkipInBrowser walks the path of an ordering key held by a DEAD
// receipt: the overview counts the receipts that wait, the list tags them,
// the DEAD head offers Skip next to Requeue, and after the skip a worker runs
// the key's later receipts in order while the skipped one stays DEAD.
func TestSkipInBrowser(t *testing.T) {
	browser := findBrowser(t)
	pool := newPool(t)
	quiet := slog.New(slog.DiscardHandler)
	client, err := inbox.NewClient(pool, inbox.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	reg := handler.NewRegistry()
	for _, ev := range []string{"payment.captured", "payment.refunded", "payment.settled"} {
		err := reg.Register(handler.Key{Consumer: ledger, EventType: ev, SchemaVersion: 1}, func(ctx context.Context, m *handler.Msg) error {
			var p struct{ PaymentID string }
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				return handler.Permanent(err)
			}
			if m.EventType == "payment.captured" && p.PaymentID == "pay-81" {
				return handler.Permanent(errors.New("ledger account 4711 is closed: payment pay-81 cannot be booked"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	worker, err := inbox.NewWorker(pool, reg, inbox.WorkerConfig{Consumers: []string{ledger}, Concurrency: 2,
		PollInterval: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	accept := func(msgID, eventType, payment string) inbox.ID {
		t.Helper()
		res, err := client.Accept(t.Context(), inbox.Message{
			Identity:  inbox.Identity{Scope: inbox.Tenant("acme"), Source: "psp", Consumer: ledger, MessageID: msgID},
			EventType: eventType, SchemaVersion: 1,
			Payload:     map[string]string{"paymentId": payment, "amount": "42.00"},
			OrderingKey: payment,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	head := accept("evt-81-1", "payment.captured", "pay-81")
	refund := accept("evt-81-2", "payment.refunded", "pay-81")
	settle := accept("evt-81-3", "payment.settled", "pay-81")
	other := accept("evt-82-1", "payment.captured", "pay-82")
	inboxtest.Drain(t, worker)
	inboxtest.WaitForStatus(t, pool, head, inbox.StatusDead, 0)
	inboxtest.WaitForStatus(t, pool, other, inbox.StatusCompleted, 0)
	inboxtest.WaitForStatus(t, pool, refund, inbox.StatusPending, 0)

	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h, err := console.New(admin, console.Config{LocalActor: actor, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h) // loopback only
	t.Cleanup(srv.Close)
	b := newBrowserSession(t, browser)

	// The overview counts what waits; the list tags it.
	b.do("open the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#live table")))
	b.wantText("#n-blocked", "2")
	b.do("open the list", chromedp.Navigate(srv.URL+"/receipts?consumer="+ledger), chromedp.WaitVisible(chromedp.CSS("table.data")))
	if n := b.eval(`String(document.querySelectorAll("table.data tbody tr .tag-warn").length)`); n != "2" {
		t.Fatalf("list tags %s receipts blocked, want 2", n)
	}
	b.do("open a waiting receipt", chromedp.Navigate(srv.URL+"/receipts/"+refund.String()), chromedp.WaitVisible(chromedp.CSS("h1 .badge")))
	b.wantText("section.actions", "Requeue or Skip")

	// The DEAD head: Requeue and Skip side by side.
	b.do("open the dead head", chromedp.Navigate(srv.URL+"/receipts/"+head.String()), chromedp.WaitVisible(chromedp.ID("skip-reason")))
	b.wantText("h1 .badge", "DEAD")
	b.wantText("dl.kv", "pay-81")
	b.wantText("dl.kv", "holds its key")
	b.wantText("#key-blocked", "2 receipts of its key")
	b.wantText(`form[action$="/skip"]`, "stays DEAD")
	b.wantText(`form[action$="/requeue"] button`, "Requeue receipt")
	b.screenshot("receipt-skip")
	// On a phone both forms fit the screen.
	b.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("skip-reason")))
	if got := b.eval(`String(document.documentElement.scrollWidth <= window.innerWidth)`); got != "true" {
		t.Fatalf("the receipt page scrolls sideways on a phone (%s px wide)", b.eval(`String(document.documentElement.scrollWidth)`))
	}
	b.screenshot("receipt-skip-phone")
	b.do("desktop viewport", chromedp.EmulateViewport(1280, 900), chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("skip-reason")))

	b.do("skip", chromedp.SendKeys(chromedp.ID("skip-reason"), "account 4711 closed for good; capture booked by hand (FIN-2203)"),
		chromedp.Click(chromedp.CSS(`form[action$="/skip"] button`)), chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.wantText(".notice", "Skipped")
	b.wantText("h1 .badge", "DEAD")
	b.wantText("dl.kv", "skipped: no longer holds its key")
	b.wantText("section[aria-labelledby=h-audit] tbody", actor)
	b.wantText("section[aria-labelledby=h-audit] tbody", "FIN-2203")
	if n := b.eval(`String(document.querySelectorAll('form[action$="/skip"]').length)`); n != "0" {
		t.Fatalf("%s skip forms after the skip, want none", n)
	}
	b.screenshot("receipt-skipped")

	// The key runs again, in order; the skipped receipt stays DEAD.
	if err := worker.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Stop(context.Background()) })
	inboxtest.WaitForStatus(t, pool, settle, inbox.StatusCompleted, 30*time.Second)
	inboxtest.WaitForStatus(t, pool, refund, inbox.StatusCompleted, 0)
	inboxtest.WaitForStatus(t, pool, head, inbox.StatusDead, 0)
	b.do("open the overview again", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#live table")))
	if n := b.eval(`String(document.querySelectorAll("#n-blocked").length)`); n != "0" {
		t.Fatalf("the overview still counts blocked receipts (%s cards)", n)
	}
	b.checkConsole()
}
