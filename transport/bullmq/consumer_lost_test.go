package bullmq_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/bullmq"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/internal/testlog"
)

// The queue's keys vanish under a consumer that has taken jobs from it (as
// with a Redis restart without persistence): the consumer reports
// ErrQueueLost to OnError, once, counts it in Stats, and takes the jobs
// added afterwards.
func TestQueueLostIsReported(t *testing.T) {
	t.Parallel()
	addr := redisAddr(t)
	e := &env{addr: addr, rdb: newRedis(t, addr), queue: "pgi-" + randomID()}
	t.Cleanup(e.cleanup)
	pool := newPool(t)
	var mu sync.Mutex
	var reported []error
	cfg := e.config(testlog.Errors(t))
	cfg.OnError = func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}
	c, err := bullmq.NewConsumer(newClient(t, pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cfg.Redis.Close() })
	drill.Run(t, c.Run)
	add := func(n int) {
		t.Helper()
		id := strconv.Itoa(n)
		if ok, err := bullmq.AddJob(context.Background(), e.rdb, e.queue, id, "order", `{"n":`+id+`}`); err != nil || !ok {
			t.Fatalf("adding job %s: %v %v", id, ok, err)
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(reported)
	}

	add(1)
	drill.Eventually(t, 20*time.Second, "the first job stored", func() bool { return receipts(t, pool) == 1 })
	// Idle checks of a queue that is still there; they leave no trace to
	// wait for: watch for a while.
	testkit.Never(t, 500*time.Millisecond, func() bool { return count() != 0 }, "a report before the queue was lost")
	e.cleanup() // every key of the queue
	drill.Eventually(t, 20*time.Second, "ErrQueueLost reported", func() bool { return count() > 0 })
	mu.Lock()
	first := reported[0]
	mu.Unlock()
	if !errors.Is(first, bullmq.ErrQueueLost) {
		t.Fatalf("reported %v, want ErrQueueLost", first)
	}
	add(2)
	drill.Eventually(t, 20*time.Second, "the job added after the loss stored", func() bool { return receipts(t, pool) == 2 })
	testkit.Never(t, 500*time.Millisecond, func() bool { return count() != 1 }, "a second report of one loss")
	if n, s := count(), c.Stats().QueuesLost; n != 1 || s != 1 {
		t.Fatalf("%d reports, Stats().QueuesLost = %d: want one loss reported once", n, s)
	}
}
