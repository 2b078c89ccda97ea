package nats_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	pgnats "github.com/pginbox/pginbox/transport/nats"
	"github.com/pginbox/pginbox/transport/nats/internal/natstest"
)

// The stream is deleted under a consumer that has consumed from it: the
// consumer reports ErrStreamLost to OnError and counts it in Stats, keeps
// running, and consumes again once the stream is back.
func TestStreamLostIsReportedAndRunGoesOn(t *testing.T) {
	t.Parallel()
	url := natsURL(t)
	pool := newPool(t)
	e := newEnv(t, url, true)
	var mu sync.Mutex
	var reported []error
	cfg := e.config(url, testlog.Errors(t))
	cfg.Decode = decodeByEventID
	cfg.OnError = func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}
	c, err := pgnats.NewConsumer(newClient(t, pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { done <- c.Run(ctx) }()

	e.publish(t, "pub-1", `{"eventId":"evt-1"}`)
	drill.Eventually(t, 20*time.Second, "the first message stored", func() bool { return receipts(t, pool) == 1 })

	if err := e.js.DeleteStream(context.Background(), e.stream); err != nil {
		t.Fatal(err)
	}
	drill.Eventually(t, 30*time.Second, "ErrStreamLost reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reported) > 0
	})
	mu.Lock()
	first := reported[0]
	mu.Unlock()
	if !errors.Is(first, pgnats.ErrStreamLost) {
		t.Fatalf("reported %v, want ErrStreamLost", first)
	}
	if n := c.Stats().StreamsLost; n < 1 {
		t.Fatalf("Stats().StreamsLost = %d, want at least 1", n)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned %v after the stream was deleted, want it to keep going", err)
	case <-time.After(500 * time.Millisecond):
	}

	natstest.CreateStream(t, e.js, jetstream.StreamConfig{Name: e.stream, Subjects: []string{e.subject}, Storage: jetstream.FileStorage})
	e.publish(t, "pub-2", `{"eventId":"evt-2"}`)
	drill.Eventually(t, 30*time.Second, "the message after the stream came back stored", func() bool { return receipts(t, pool) == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after cancel", err)
	}
}
