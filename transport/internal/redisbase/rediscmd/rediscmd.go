// Package rediscmd is what the programs on Redis (redis-inbox,
// bullmq-inbox) add to brokercmd: the -redis-url flag and the client it
// dials. It is apart from redisbase so that the adapters' libraries do not
// build the programs' kit.
package rediscmd

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/transport/internal/brokercmd"
)

// ClientFlag is the -redis-url row of a program's flag table: the program
// dials it into *rdb when it starts, before the database, so that a bad
// URL is refused first. The client closes when the program ends.
func ClientFlag(rdb *redis.UniversalClient) brokercmd.Flag {
	url := new(string)
	return brokercmd.Var(url, "redis-url", "redis://127.0.0.1:6379/0", "Redis URL").Env("REDIS_URL").
		Dial(func(_ context.Context, s *brokercmd.Session) error {
			opts, err := redis.ParseURL(*url)
			if err != nil {
				return fmt.Errorf("-redis-url: %w", err)
			}
			*rdb = redis.NewClient(opts)
			s.Defer(*rdb)
			return nil
		})
}
