package brokertest

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestURLHost(t *testing.T) {
	t.Parallel()
	got, err := urlHost("amqp://guest:guest@127.0.0.1:5672/")
	if err != nil || got != "127.0.0.1:5672" {
		t.Fatalf("urlHost = %q, %v", got, err)
	}
	if _, err := urlHost("127.0.0.1"); err == nil {
		t.Fatal("urlHost accepted a value without host and port")
	}
}

func TestRequireReachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b := Broker{Name: "test", Env: "BROKERTEST_UNUSED_ENV", Default: ln.Addr().String()}
	if got := Require(t, b); got != ln.Addr().String() {
		t.Fatalf("Require = %q", got)
	}
}

// TestRequireMissing runs a child test against a closed port: outside CI it
// skips with one line, with CI=true it fails.
func TestRequireMissing(t *testing.T) {
	if os.Getenv("BROKERTEST_CHILD") == "1" {
		Require(t, Broker{Name: "Nothing", Env: "BROKERTEST_UNUSED_ENV", Default: closedAddr(t)})
		t.Fatal("Require returned for an unreachable broker")
	}
	t.Parallel()
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRequireMissing$", "-test.v")
		cmd.Env = append(os.Environ(), "BROKERTEST_CHILD=1", "CI="+ci)
		out, err := cmd.CombinedOutput()
		switch {
		case ci == "" && (err != nil || !strings.Contains(string(out), "SKIP") || !strings.Contains(string(out), "skipping: Nothing not reachable")):
			t.Fatalf("outside CI: want a skip naming the broker, got err=%v\n%s", err, out)
		case ci == "true" && (err == nil || !strings.Contains(string(out), "CI must provide it")):
			t.Fatalf("in CI: want a failure, got err=%v\n%s", err, out)
		}
	}
}

func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
