//go:build unix

package nats_test

import (
	"os"
	"testing"

	"github.com/pginbox/pginbox/transport/internal/relaytest"
)

const envCrashURL = "PGINBOX_NATS_CHILD_URL"

func TestPublisherCrashChild(t *testing.T) {
	dsn := relaytest.ChildDSN()
	if dsn == "" {
		t.Skip("only runs as a child process of TestPublisherCrashAfterPublishBeforeMark")
	}
	relaytest.RunChild(t, dsn, newPublisher(t, os.Getenv(envCrashURL)))
}

// A relay SIGKILLed after the stream acknowledged a batch and before it
// marked the events: the next relay publishes them again with the same
// Nats-Msg-Id, the stream acknowledges those as duplicates and keeps one
// copy of every event.
func TestPublisherCrashAfterPublishBeforeMark(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	e := newEnv(t, url, false)
	dsn := testDSN(t)
	pool := relaytest.Pool(t, dsn)
	const n = 40
	ev := relaytest.Emit(t, pool, e.subject, n)
	p := newPublisher(t, url)
	unmarked := relaytest.Crash(t, pool, dsn, "TestPublisherCrashChild", p, envCrashURL+"="+url)
	if unmarked == 0 {
		t.Fatal("the child published nothing before the crash point")
	}
	if got := relaytest.Published(t, pool); got != n {
		t.Fatalf("%d events PUBLISHED after the takeover, want %d", got, n)
	}
	if p.Duplicates() != int64(unmarked) {
		t.Fatalf("%d duplicate PubAcks, want the %d events published before the crash", p.Duplicates(), unmarked)
	}
	t.Logf("nats publisher crash: sent=%d published=%d (of which %d twice, acknowledged as duplicates)", n, n+unmarked, unmarked)
	received(t, ev, e.streamMsgs(t, n)).Report(t, "nats publisher crash", ev, relaytest.Published(t, pool), false)
}
