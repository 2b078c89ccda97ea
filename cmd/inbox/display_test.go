package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/user"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/outbox"
)

// rawControl matches what must never reach a terminal raw: C0 controls but
// newline and tab, DEL, C1 controls, bidirectional and zero-width formatting
// characters, and invalid UTF-8.
var rawControl = regexp.MustCompile("[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\ufffd]")

func wantNoRaw(t *testing.T, what, out string) {
	t.Helper()
	if m := rawControl.FindStringIndex(out); m != nil {
		t.Errorf("%s: raw %q in the output: …%s…", what, out[m[0]:m[1]], out[max(0, m[0]-60):min(len(out), m[1]+60)])
	}
}

// Bad bytes in any filter or identity flag are a usage error (exit 2) that
// names the flag, not a failed database call (exit 1).
func TestBadFlagBytesAreUsageErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db := map[string]string{"DATABASE_URL": f.dsn, "USER": "alice"}
	id := f.dead.String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "--consumer", "\xff\xfe"}, `--consumer "\xff\xfe": invalid UTF-8 at byte 0; names are UTF-8 text`},
		{[]string{"list", "--source", "a\x00b"}, `--source "a\x00b": control character U+0000 at byte 1`},
		{[]string{"list", "--consumer", strings.Repeat("c", 256)}, `256 bytes: at most 255 allowed`},
		{[]string{"list", "--tenant", "\xff"}, `--tenant: invalid UTF-8 at byte 0`},
		{[]string{"stats", "--tenant", "a\x00b"}, `--tenant: control character U+0000 at byte 1`},
		{[]string{"show", id, "--tenant", "a\x1b[2Jb"}, `--tenant: control character U+001B at byte 1`},
		{[]string{"requeue", id, "--version", "3", "--reason", "r", "--tenant", "\xc3("}, `--tenant: invalid UTF-8`},
		{[]string{"purge", "--older-than", "30d", "--dry-run", "--tenant", "\xff"}, `--tenant: invalid UTF-8`},
		{[]string{"console", "--tenant", "\xff", "--listen", "127.0.0.1:0"}, `--tenant: invalid UTF-8 at byte 0`},
		{[]string{"list", "--status", "\xff"}, `--status "\xff": want statuses`},
		{[]string{"list", "--since", "\xff\x00"}, `--since "\xff\x00": want RFC 3339`},
		{[]string{"list", "--after", "\xff"}, `--after "\xff": want a receipt ID`},
		{[]string{"show", "\xff\x00"}, `"\xff\x00": want a receipt ID`},
		{[]string{"requeue", id, "--version", "3", "--reason", "a\x00b"}, `--reason: PostgreSQL text cannot store U+0000`},
		{[]string{"requeue", id, "--version", "3", "--reason", "\xff"}, `--reason: must be valid UTF-8`},
		{[]string{"replay", f.completed.String(), "--version", "4", "--reason", "r", "--actor", "a\x00b"}, `--actor:`},
		{[]string{"console", "--actor", "a\x00b", "--listen", "127.0.0.1:0"}, `Config.LocalActor: contains a control character`},
		{[]string{"outbox", "list", "--destination", "\xff\xfe"}, `--destination "\xff\xfe": invalid UTF-8`},
		{[]string{"outbox", "list", "--key", "k\x00"}, `--key "k\x00": control character U+0000`},
	} {
		code, stdout, stderr := runIn(t, db, tc.args...)
		name := fmt.Sprintf("%q", tc.args)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "for usage") {
			t.Errorf("inbox %s: exit %d, stderr %q; want exit 2 and %q", name, code, stderr, tc.want)
		}
		if strings.Contains(stderr, "SQLSTATE") || stdout != "" {
			t.Errorf("inbox %s reached the database: %q %q", name, stdout, stderr)
		}
		wantNoRaw(t, name, stderr)
	}
	if st, v := stateOf(t, f, f.dead); st != "DEAD" || v != 3 {
		t.Fatalf("a refused requeue changed the receipt: %s v%d", st, v)
	}
}

func stateOf(t *testing.T, f *fixture, id inbox.ID) (status string, version int64) {
	t.Helper()
	if err := f.pool.QueryRow(context.Background(), "SELECT status, version FROM pginbox_receipts_live WHERE id = $1", id).Scan(&status, &version); err != nil {
		t.Fatal(err)
	}
	return status, version
}

const rlo = "\u202e" // right-to-left override: "evt-\u202e1100" shows as "evt-0011"

// Control and bidirectional characters in what receipts and events carry are
// printed escaped by stats, list, show, --watch and the outbox commands.
func TestOutputEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	c, err := inbox.NewClient(f.pool, inbox.Config{Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Accept(ctx, inbox.Message{
		Identity: inbox.Identity{Scope: inbox.Tenant("acme" + rlo), Source: "shop" + rlo + "gnp.exe",
			Consumer: "orders" + rlo + ".v1", MessageID: "evt-" + rlo + "1100"},
		EventType: "order" + rlo + ".placed", SchemaVersion: 1,
		Payload:  map[string]string{"note" + rlo: "abc\u2066"},
		Metadata: map[string]string{"trace" + rlo: "v\u200b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	inboxtest.SetState(t, f.pool, res.ID, "status = 'DEAD', version = 3, last_error = $2", "boom\x1b[2J\x1b[31m red "+rlo+"txt.exe\x07\nsecond")
	db := map[string]string{"DATABASE_URL": f.dsn, "USER": "mallory" + rlo}
	if code, _, stderr := runIn(t, db, "requeue", res.ID.String(), "--version", "3", "--reason", "fixed "+rlo+"it"); code != exitOK {
		t.Fatalf("requeue: %d %s", code, stderr)
	}
	inboxtest.SetState(t, f.pool, res.ID, "status = 'DEAD', last_error = $2", "boom\x1b[2J\x1b[31m red "+rlo+"txt.exe\x07\nsecond")
	err = pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		_, err := outbox.Emit(ctx, tx, outbox.Event{Type: "order" + rlo + ".confirmed", SchemaVersion: 1, Source: "orders" + rlo,
			Destination: "billing" + rlo + ".v1", OrderingKey: "o-" + rlo + "1", Payload: map[string]string{"k": "v" + rlo},
			Metadata: map[string]string{"m" + rlo: "x"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var event string
	if err := f.pool.QueryRow(ctx, "UPDATE pginbox_outbox SET status = 'DEAD', last_error = $1 RETURNING id::text", "no exchange \x1b]0;pwned\x07"+rlo).Scan(&event); err != nil {
		t.Fatal(err)
	}
	eventID, err := parseID(event)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"stats"}, []string{`orders\u202e.v1  `}},
		{[]string{"list"}, []string{`tenant(acme\u202e)`, `orders\u202e.v1`, `shop\u202egnp.exe`, `evt-\u202e1100`, `order\u202e.placed v1`}},
		{[]string{"show", res.ID.String()}, []string{
			"scope        tenant(acme\\u202e)", `shop\u202egnp.exe`, `evt-\u202e1100`,
			`last error   boom\x1b[2J\x1b[31m red \u202etxt.exe\a second`,
			`"trace\u202e":"v\u200b"`, `"note\u202e": "abc\u2066"`, `mallory\u202e`, `fixed \u202eit`,
		}},
		{[]string{"outbox", "stats"}, []string{`billing\u202e.v1`}},
		{[]string{"outbox", "list"}, []string{`billing\u202e.v1`, `o-\u202e1`, `order\u202e.confirmed v1`, `orders\u202e`}},
		{[]string{"outbox", "show", eventID.String()}, []string{`no exchange \x1b]0;pwned\a\u202e`, `"m\u202e":"x"`, `"k": "v\u202e"`}},
	} {
		code, out, stderr := runIn(t, db, tc.args...)
		if code != exitOK {
			t.Fatalf("inbox %s: exit %d: %s", strings.Join(tc.args, " "), code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("inbox %s lacks %q:\n%s", strings.Join(tc.args, " "), w, out)
			}
		}
		wantNoRaw(t, "inbox "+strings.Join(tc.args, " "), out)
	}

	// --watch, piped and on a terminal.
	stdout, _, stop := startWatch(t, f.dsn, false)
	stdout.waitFor(t, `orders\\u202e\.v1 pending=0 processing=0 retryable=0 dead=1`)
	stop()
	wantNoRaw(t, "stats --watch", stdout.String())
	stdout, _, stop = startWatchOn(t, f.dsn, newVT(t, 200, 40), "--tenant", "acme"+rlo)
	stdout.waitFor(t, `(?s)inbox stats, tenant\(acme\\u202e\), every.*orders\\u202e\.v1 `)
	stop()
}

// startWatchOn is startWatch on the terminal v.
func startWatchOn(t *testing.T, dsn string, v *vt, args ...string) (stdout *watchOutput, screen func() (rows []string, text string), stop func() int) {
	t.Helper()
	stdout = newWatchOutput()
	var mu sync.Mutex
	tee := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		v.Write(p)
		return stdout.Write(p)
	})
	e := &env{stdout: tee, stderr: &bytes.Buffer{}, getenv: func(k string) string { return map[string]string{"DATABASE_URL": dsn}[k] },
		currentUser: user.Current, tty: true, size: v.size}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- e.run(ctx, append([]string{"stats", "--watch", "--interval", "100ms"}, args...)) }()
	var once sync.Once
	var exit int
	stop = func() int {
		once.Do(func() { cancel(); exit = <-code })
		return exit
	}
	t.Cleanup(func() { stop() })
	return stdout, func() ([]string, string) { mu.Lock(); defer mu.Unlock(); return v.screen(), v.text() }, stop
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// On a terminal narrower than its rows, --watch redraws in place: later
// refreshes neither scroll the terminal nor leave pieces of older ones, and
// what was on screen above the first one stays.
func TestStatsWatchRedrawsWrappedRowsInPlace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, err := inbox.NewClient(f.pool, inbox.Config{Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	// Long names: every row of the table is wider than the terminal.
	for i := range 6 {
		_, err := c.Accept(context.Background(), inbox.Message{
			Identity: inbox.Identity{Scope: inbox.Global(), Source: "shop",
				Consumer: fmt.Sprintf("consumer-%d.", i) + strings.Repeat("x", 200) + "注文", MessageID: "m"},
			EventType: "e", SchemaVersion: 1, Payload: map[string]int{"n": i},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name       string
		cols, rows int
		cut        bool // the frame is taller than the terminal
	}{
		{"fits", 60, 40, false},
		{"taller than the terminal", 50, 12, true},
		{"narrower than the shortest name", 12, 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := newVT(t, tc.cols, tc.rows)
			v.Write([]byte("$ inbox stats --watch\n"))
			stdout, screen, stop := startWatchOn(t, f.dsn, v, "--global")
			frame := regexp.QuoteMeta("inbox stats, global, every 100ms")
			stdout.waitFor(t, `(?s)(`+frame+`.*){2}`) // a redraw
			first := v.scrolled
			stdout.waitAfter(t, len(stdout.String()), `(?s)(`+frame+`.*){3}`)
			if code := stop(); code != exitOK {
				t.Fatalf("exit %d", code)
			}
			rows, text := screen()
			shown := strings.Join(rows, "\n")
			if v.scrolled != first {
				t.Errorf("the terminal scrolled %d rows during later refreshes:\n%s", v.scrolled-first, shown)
			}
			if n := strings.Count(text, "inbox stats, global"); n != 1 {
				t.Errorf("%d frame headers on screen, want 1:\n%s", n, shown)
			}
			if !tc.cut && !strings.HasPrefix(text, "$ inbox stats --watch") {
				t.Errorf("the line above the watch was overwritten:\n%s", shown)
			}
			switch {
			case tc.cut:
				if !strings.Contains(text, "more lines: enlarge the terminal") {
					t.Errorf("a cut frame does not say so:\n%s", shown)
				}
			default:
				// The counts of every consumer are on screen with its name.
				for i := range 6 {
					if !regexp.MustCompile(fmt.Sprintf(`consumer-%d\.x+…? +1 +0 +0 +0 +- +1 +\S+s `, i)).MatchString(text) {
						t.Errorf("consumer-%d's row is not on screen:\n%s", i, shown)
					}
				}
				if !strings.Contains(text, "dead: 0") {
					t.Errorf("no total on screen:\n%s", shown)
				}
			}
		})
	}
}

// `inbox console --read-only` takes no actions, so it needs no actor: it
// starts without --actor, $USER and $LOGNAME.
func TestConsoleReadOnlyNeedsNoActor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut lockedBuffer
	e := &env{stdout: &out, stderr: &errOut, getenv: func(k string) string { return map[string]string{"DATABASE_URL": f.dsn}[k] }}
	done := make(chan int, 1)
	go func() { done <- e.run(ctx, []string{"console", "--read-only", "--listen", "127.0.0.1:0"}) }()
	re := regexp.MustCompile(`console: (http://127\.0\.0\.1:[0-9]+)/ \(all scopes, read-only\)`)
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == ""; {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("inbox console --read-only exited with %d: %s%s", code, out.String(), errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("inbox console --read-only did not start: %s%s", out.String(), errOut.String())
		}
	}
	code, body := httpGet(t, base+"/receipts/"+f.dead.String())
	cancel()
	if exit := <-done; exit != exitOK {
		t.Errorf("exit %d after Ctrl-C", exit)
	}
	if code != http.StatusOK || !strings.Contains(body, "takes no actions (read-only)") || strings.Contains(body, "Requeue receipt") {
		t.Fatalf("read-only console without an actor: %d\n%s", code, body)
	}
	// With actions, someone must be named.
	code2, _, stderr := runIn(t, map[string]string{"DATABASE_URL": f.dsn}, "console", "--listen", "127.0.0.1:0")
	if code2 != exitUsage || !strings.Contains(stderr, "--actor is required") || !strings.Contains(stderr, "--read-only") {
		t.Errorf("console without an actor: exit %d, %q", code2, stderr)
	}
}
