package redisbase

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// durableCheckTimeout bounds the start-up CONFIG GET.
const durableCheckTimeout = 5 * time.Second

// checkDurable refuses a Redis without appendonly (an acknowledged write it
// loses in a restart is an event the relay marked published), or one whose
// setting cannot be read, wrapping notDurable (the transport's
// ErrNotDurable); nil when appendonly is yes.
func checkDurable(rdb redis.UniversalClient, notDurable error) error {
	ctx, cancel := context.WithTimeout(context.Background(), durableCheckTimeout)
	defer cancel()
	reply, err := rdb.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		return fmt.Errorf("%w: could not read appendonly (CONFIG GET: %v); make sure AOF is on, then set PublisherConfig.AllowNotDurable", notDurable, err)
	}
	if reply["appendonly"] != "yes" {
		return fmt.Errorf("%w: appendonly is %q; run CONFIG SET appendonly yes (and set it in redis.conf), or set PublisherConfig.AllowNotDurable for a Redis whose loss you accept", notDurable, reply["appendonly"])
	}
	return nil
}
