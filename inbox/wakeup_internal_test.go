package inbox

import (
	"context"
	"testing"
	"time"
)

// The wake-up of an accept of a quiet scope (no accept of it in the last
// window) is sent at once, up to wakeupEarlyScopes a window; a busy scope's
// waits for the window's end. The clock stands an hour before the window
// ends, so only an early wake-up can arrive while the test watches.
func TestWakeupsSendEarlyForQuietScopes(t *testing.T) {
	t.Parallel()
	w, start, expectSend, expectNone := recordedWakeups(t)
	busy, quiet := Tenant("busy"), Tenant("quiet")

	w.later([]string{"c"}, []Scope{busy})
	expectNone("another accept of the inline accept's scope")
	w.later([]string{"c"}, []Scope{quiet})
	expectSend("the first accept of a quiet scope")
	w.later([]string{"c"}, []Scope{quiet})
	expectNone("a second accept of that scope")
	for _, s := range []Scope{Tenant("t3"), Tenant("t4"), Global()} {
		w.later([]string{"c"}, []Scope{s})
		expectSend("the first accept of " + s.String())
	}
	w.later([]string{"c"}, []Scope{Tenant("t6")})
	expectNone("a fifth quiet scope in the window")

	// The next window, its end again an hour away: quiet, whose last accept
	// was a window ago, is quiet again; busy, which opened the window, is not.
	next := start.Add(wakeupWindow)
	w.now = func() time.Time { return next }
	if !w.inline(busy) {
		t.Fatal("the next window's first accept did not notify inline")
	}
	w.now = func() time.Time { return next.Add(-time.Hour) }
	w.later([]string{"c"}, []Scope{busy})
	w.later([]string{"c"}, []Scope{quiet})
	expectSend("an accept of a scope quiet for a window")
	w.later([]string{"c"}, []Scope{busy})
	expectNone("the busy scope's accepts")
	w.close()
	expectSend("close, for what the window still owed")
}

// A batch over many quiet scopes spends one early wake-up of the window, not
// one per scope, so the window keeps the rest for other accepts.
func TestWakeupsSpendOneEarlyWakeupPerBatch(t *testing.T) {
	t.Parallel()
	w, _, expectSend, expectNone := recordedWakeups(t)
	w.later([]string{"c", "d"}, []Scope{Tenant("a"), Tenant("b"), Tenant("c"), Tenant("d"), Tenant("e")})
	expectSend("a batch over five quiet scopes")
	expectNone("the batch's one wake-up, sent")
	for _, s := range []Scope{Tenant("f"), Tenant("g"), Tenant("h")} {
		w.later([]string{"c"}, []Scope{s})
		expectSend("the first accept of " + s.String())
	}
	w.later([]string{"c"}, []Scope{Tenant("i")})
	expectNone("a fifth early wake-up in the window")
	w.close()
	expectSend("close, for what the window still owed")
}

// recordedWakeups returns wakeups whose window opened at start (the clock then
// stands an hour before the window's end, so only early wake-ups are sent
// while a test watches), and checks for a sent wake-up or none.
func recordedWakeups(t *testing.T) (w *wakeups, start time.Time, expectSend, expectNone func(step string)) {
	sent := make(chan []string, 16)
	w = newWakeups(nil, nil, nil)
	w.send = func(_ context.Context, _ int, consumers []string) error {
		sent <- consumers
		return nil
	}
	start = time.Unix(1_000_000, 0)
	w.now = func() time.Time { return start }
	if !w.inline(Tenant("busy")) {
		t.Fatal("the window's first accept did not notify inline")
	}
	w.now = func() time.Time { return start.Add(-time.Hour) }
	expectSend = func(step string) {
		t.Helper()
		select {
		case <-sent:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no wake-up sent before the window's end", step)
		}
	}
	expectNone = func(step string) {
		t.Helper()
		select {
		case c := <-sent:
			t.Fatalf("%s: wake-up %v sent before the window's end", step, c)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return w, start, expectSend, expectNone
}
