package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/user"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

// watchOutput is a stdout that tests can wait on.
type watchOutput struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newWatchOutput() *watchOutput { return &watchOutput{changed: make(chan struct{}, 1)} }

func (o *watchOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
	return o.buf.Write(p)
}

func (o *watchOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the output matches re (the deadline only keeps a
// broken watch from hanging the test).
func (o *watchOutput) waitFor(t *testing.T, re string) { o.waitAfter(t, 0, re) }

// waitAfter waits until the output past its first off bytes matches re.
func (o *watchOutput) waitAfter(t *testing.T, off int, re string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(30 * time.Second)
	for !rx.MatchString(o.String()[off:]) {
		select {
		case <-o.changed:
		case <-deadline:
			t.Fatalf("output never matched %s:\n%s", re, o.String())
		}
	}
}

// startWatch runs `inbox stats --watch args...` in-process until the
// returned stop is called, which returns its exit code.
func startWatch(t *testing.T, dsn string, tty bool, args ...string) (stdout, stderr *watchOutput, stop func() int) {
	t.Helper()
	stdout, stderr = newWatchOutput(), newWatchOutput()
	e := &env{stdout: stdout, stderr: stderr, getenv: func(k string) string { return map[string]string{"DATABASE_URL": dsn}[k] }, currentUser: user.Current, tty: tty}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- e.run(ctx, append([]string{"stats", "--watch", "--interval", "100ms"}, args...)) }()
	return stdout, stderr, func() int {
		cancel() // what Ctrl-C does to the real command's context
		return <-code
	}
}

// Off a terminal, --watch prints one stamped line per consumer per refresh,
// shows changes at the next refresh, keeps going through a failed refresh,
// and Ctrl-C ends it with exit code 0.
func TestStatsWatchPlainLines(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	stdout, stderr, stop := startWatch(t, f.dsn, false)
	stamp := `\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ `
	stdout.waitFor(t, `(?m)^`+stamp+`orders\.projection\.v1 pending=1 processing=0 retryable=0 dead=2 due=1 oldest_due=\S+$`)

	c, err := inbox.NewClient(f.pool, inbox.Config{Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Accept(context.Background(), inbox.Message{
		Identity:  inbox.Identity{Scope: inbox.Global(), Source: "shop", Consumer: "orders.projection.v1", MessageID: "evt-9"},
		EventType: "order.placed", SchemaVersion: 1, Payload: map[string]string{"orderId": "9"},
	})
	if err != nil {
		t.Fatal(err)
	}
	stdout.waitFor(t, `(?m)^`+stamp+`orders\.projection\.v1 pending=2 processing=0 retryable=0 dead=2 due=2 `)

	// A refresh that fails is reported and the watch goes on.
	if _, err := f.pool.Exec(context.Background(), "ALTER TABLE pginbox_work RENAME TO pginbox_work_away"); err != nil {
		t.Fatal(err)
	}
	stderr.waitFor(t, `(?m)^`+stamp+`inbox stats: .*run .inbox migrate up. .*\(trying again in 100ms\)$`)
	if _, err := f.pool.Exec(context.Background(), "ALTER TABLE pginbox_work_away RENAME TO pginbox_work"); err != nil {
		t.Fatal(err)
	}
	stdout.waitAfter(t, len(stdout.String()), `(?m)^`+stamp+`orders\.projection\.v1 pending=2 `) // back

	if code := stop(); code != exitOK {
		t.Errorf("exit %d after Ctrl-C, want 0; stderr:\n%s", code, stderr.String())
	}
	if strings.Contains(stdout.String(), clearScreen) {
		t.Error("escape codes in output that is not a terminal")
	}
}

// On a terminal, --watch redraws the table in place.
func TestStatsWatchTerminal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	stdout, _, stop := startWatch(t, f.dsn, true, "--global")
	stdout.waitFor(t, `(?s)`+regexp.QuoteMeta(clearScreen)+`inbox stats, global, every 100ms, at [^\n]+; Ctrl-C to stop\n\nCONSUMER .*\n.*orders\.projection\.v1 +1 +0 +0 +0 +- +1 `)
	stdout.waitFor(t, `(?s)(`+regexp.QuoteMeta(clearScreen)+`.*){2}`) // and again
	if code := stop(); code != exitOK {
		t.Errorf("exit %d, want 0", code)
	}
}

// --watch --json writes one JSON object per refresh.
func TestStatsWatchJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	stdout, _, stop := startWatch(t, f.dsn, false, "--json", "--tenant", "tenant-a")
	stdout.waitFor(t, `(?s)(\{[^\n]*\}\n){2}`)
	if code := stop(); code != exitOK {
		t.Errorf("exit %d, want 0", code)
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var got struct {
			At    time.Time `json:"at"`
			Scope jsonScope `json:"scope"`
			Dead  int64     `json:"dead"`
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if got.At.IsZero() || got.Scope.Kind != "tenant" || got.Dead != 1 {
			t.Errorf("line %s", line)
		}
	}
}

// Bad watch flags and a database without the schema are refused up front.
func TestStatsWatchErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"stats", "--interval", "5s", "--database-url", "x"}, exitUsage, "--interval needs --watch"},
		{[]string{"stats", "--watch", "--interval", "10ms", "--database-url", "x"}, exitUsage, "--interval 10ms: want at least 100ms"},
		{[]string{"stats", "--watch", "--interval", "soon", "--database-url", "x"}, exitUsage, "--interval"},
		{[]string{"stats", "--watch", "--database-url", inboxtest.EmptyDatabase(t)}, exitNotMigrated, "inbox migrate up"},
	} {
		code, _, stderr := runIn(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}
