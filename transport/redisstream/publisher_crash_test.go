//go:build unix

package redisstream_test

import (
	"os"
	"testing"

	"github.com/pginbox/pginbox/transport/internal/relaytest"
)

const envCrashAddr = "PGINBOX_REDIS_CHILD_ADDR"

func TestPublisherCrashChild(t *testing.T) {
	dsn := relaytest.ChildDSN()
	if dsn == "" {
		t.Skip("only runs as a child process of TestPublisherCrashAfterPublishBeforeMark")
	}
	relaytest.RunChild(t, dsn, newPublisher(t, newRedis(t, os.Getenv(envCrashAddr))))
}

// A relay SIGKILLed after XADD and before it marked the events: the next
// relay adds them again (Redis does not deduplicate: the stream holds both
// copies), and the receiving inbox stores and applies each event once.
func TestPublisherCrashAfterPublishBeforeMark(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	e := newEnv(t, addr)
	dsn := testDSN(t)
	pool := relaytest.Pool(t, dsn)
	const n = 40
	ev := relaytest.Emit(t, pool, e.stream, n)
	unmarked := relaytest.Crash(t, pool, dsn, "TestPublisherCrashChild", newPublisher(t, e.rdb), envCrashAddr+"="+addr)
	if unmarked == 0 {
		t.Fatal("the child published nothing before the crash point")
	}
	if got := relaytest.Published(t, pool); got != n {
		t.Fatalf("%d events PUBLISHED after the takeover, want %d", got, n)
	}
	if got := len(e.entries(t)); got != n+unmarked {
		t.Fatalf("stream holds %d entries, want %d: %d events plus the %d published twice", got, n+unmarked, n, unmarked)
	}
	receive(t, e, ev, n+unmarked, "redis publisher crash")
}
