package redisstream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
	"github.com/pginbox/pginbox/transport/redisstream"
)

// The stream and its group vanish under a consumer that has consumed from
// them (as with a Redis restart without persistence): the consumer reports
// ErrGroupLost to OnError and counts it in Stats, recreates the group and
// consumes what is added afterwards.
func TestGroupLostIsReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t, redisAddr(t))
	pool := newPool(t)
	var mu sync.Mutex
	var reported []error
	cfg := e.config(e.rdb, testlog.Errors(t))
	cfg.OnError = func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}
	c, err := redisstream.NewConsumer(newClient(t, pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	drill.Run(t, c.Run)

	e.add(t, "evt-1", `{"n":1}`)
	drill.Eventually(t, 20*time.Second, "the first entry stored", func() bool { return receipts(t, pool) == 1 })
	if err := e.rdb.Del(context.Background(), e.stream).Err(); err != nil {
		t.Fatal(err)
	}
	drill.Eventually(t, 30*time.Second, "ErrGroupLost reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reported) > 0
	})
	mu.Lock()
	first := reported[0]
	mu.Unlock()
	if !errors.Is(first, redisstream.ErrGroupLost) {
		t.Fatalf("reported %v, want ErrGroupLost", first)
	}
	if n := c.Stats().GroupsLost; n < 1 {
		t.Fatalf("Stats().GroupsLost = %d, want at least 1", n)
	}
	e.add(t, "evt-2", `{"n":2}`)
	drill.Eventually(t, 30*time.Second, "the entry added after the loss stored", func() bool { return receipts(t, pool) == 2 })
}
