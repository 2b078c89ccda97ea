package bullmq_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/transport/bullmq"
)

// The shared test Redis runs without persistence (appendonly no): a
// publisher refuses it by default, naming the setting, and takes it with
// the explicit opt-out.
func TestPublisherRefusesVolatileRedis(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	if v, err := rdb.ConfigGet(t.Context(), "appendonly").Result(); err != nil || v["appendonly"] != "no" {
		t.Fatalf("this test needs a Redis with appendonly no: CONFIG GET gave %v, %v", v, err)
	}
	_, err := bullmq.NewPublisher(bullmq.PublisherConfig{Redis: rdb})
	if !errors.Is(err, bullmq.ErrNotDurable) || !strings.Contains(err.Error(), "appendonly") || !strings.Contains(err.Error(), "AllowNotDurable") {
		t.Fatalf("NewPublisher on appendonly no: %v, want ErrNotDurable naming appendonly and the opt-out", err)
	}
	p, err := bullmq.NewPublisher(bullmq.PublisherConfig{Redis: rdb, AllowNotDurable: true})
	if err != nil {
		t.Fatalf("NewPublisher with AllowNotDurable: %v", err)
	}
	_ = p.Close()
}
