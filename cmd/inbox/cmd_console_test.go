package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConsoleRefusesNonLoopbackListen(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "[::]:8080", "192.0.2.1:8080", "example.com:8080"} {
		// No database is needed to refuse: the check comes first.
		code, _, stderr := runIn(t, map[string]string{"USER": "alice"}, "console", "--listen", addr)
		if code != exitUsage || !strings.Contains(stderr, "is not a loopback address") ||
			!strings.Contains(stderr, "has no authentication") || !strings.Contains(stderr, "Authenticate hook") {
			t.Errorf("--listen %s: exit %d, stderr %q", addr, code, stderr)
		}
	}
	code, _, stderr := runIn(t, nil, "console", "--listen", "8080")
	if code != exitUsage || !strings.Contains(stderr, "want host:port") {
		t.Errorf("--listen 8080: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runIn(t, nil, "console", "--database-url", "x")
	if code != exitUsage || !strings.Contains(stderr, "--actor is required") {
		t.Errorf("no actor: exit %d, stderr %q", code, stderr)
	}
}

// lockedBuffer is written by the command while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startConsole runs `inbox console` in-process on a free loopback port and
// returns its base URL and a function that stops it (as Ctrl-C does) and
// returns its exit code and output.
func startConsole(t *testing.T, dsn string, args ...string) (base string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut lockedBuffer
	e := &env{stdout: &out, stderr: &errOut, getenv: func(k string) string {
		return map[string]string{"DATABASE_URL": dsn, "USER": "alice"}[k]
	}}
	done := make(chan int, 1)
	go func() { done <- e.run(ctx, append([]string{"console", "--listen", "127.0.0.1:0"}, args...)) }()
	re := regexp.MustCompile(`console: (http://127\.0\.0\.1:[0-9]+)/`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("inbox console exited with %d: %s%s", code, out.String(), errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("inbox console did not start: %s%s", out.String(), errOut.String())
		}
	}
	var once sync.Once
	var code int
	stop = func() (int, string) {
		once.Do(func() { cancel(); code = <-done })
		return code, out.String() + errOut.String()
	}
	t.Cleanup(func() { stop() })
	return base, stop
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

func TestConsoleServesTheChosenScope(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	base, stop := startConsole(t, f.dsn, "--tenant", "tenant-a")
	code, body := httpGet(t, base+"/receipts/"+f.dead.String())
	if code != http.StatusOK || !strings.Contains(body, "unsupported currency") || !strings.Contains(body, "Requeue receipt") ||
		!strings.Contains(body, "records actions as “alice”") || !strings.Contains(body, "tenant(tenant-a)") {
		t.Fatalf("tenant-a receipt: %d\n%s", code, body)
	}
	// Another tenant's receipt does not exist for this console.
	if code, _ := httpGet(t, base+"/receipts/"+f.other.String()); code != http.StatusNotFound {
		t.Fatalf("tenant-b receipt through a tenant-a console: %d", code)
	}
	if code, out := stop(); code != exitOK || !strings.Contains(out, "console: stopped") {
		t.Fatalf("stop: exit %d, output %q", code, out)
	}

	base, _ = startConsole(t, f.dsn, "--read-only")
	code, body = httpGet(t, base+"/receipts/"+f.other.String())
	if code != http.StatusOK || strings.Contains(body, "Requeue receipt") || !strings.Contains(body, "read-only") {
		t.Fatalf("read-only operator console: %d\n%s", code, body)
	}
}
