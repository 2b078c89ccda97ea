package kafka_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/transport/internal/drill"
	"github.com/pginbox/pginbox/transport/kafka"
)

// A topic deleted after the consumer read from it is an error event and a
// metric (once per loss), not a fetch warning repeated forever. franz-go
// gives up on a topic missing from metadata after 15s
// (ConsiderMissingTopicDeletedAfter); its fetch error then reaches Run.
func TestTopicLost(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	pool := drill.Pool(t, testDSN(t), nil)
	var mu sync.Mutex
	var events []error
	cfg := r.config(t)
	cfg.OnError = func(err error) { mu.Lock(); events = append(events, err); mu.Unlock() }
	c, err := kafka.NewConsumer(newClient(t, pool), cfg)
	must(t, err)
	run(t, c)
	r.produceAll(t, "lost", 3, 1)
	drill.Eventually(t, 20*time.Second, "three records acked", func() bool { return c.Stats().Acked == 3 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(r.admin).DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	drill.Eventually(t, 45*time.Second, "the topic loss reported", func() bool { return c.Stats().TopicsLost == 1 })
	// Later fetches of the missing topic are dropped without a trace to
	// wait for: watch for a second report for a while.
	testkit.Never(t, time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(events) > 1 }, "a second report of one loss")
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || !errors.Is(events[0], kafka.ErrTopicLost) {
		t.Fatalf("OnError got %v, want one ErrTopicLost", events)
	}
	if s := c.Stats(); s.TopicsLost != 1 {
		t.Fatalf("stats %+v, want one topic lost", s)
	}
}
