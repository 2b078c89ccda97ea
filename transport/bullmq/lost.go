package bullmq

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/transport/internal/settle"
)

// ErrQueueLost is reported (Config.OnError, an Error log line and
// Stats.QueuesLost) when the queue's keys disappear after Run took jobs from
// it: obliterated, evicted (BullMQ needs maxmemory-policy noeviction), or
// lost in a restart of a Redis without persistence (appendonly no). The
// jobs it held are gone, silently for Redis. Run goes on and takes the jobs
// added afterwards; find out what removed them.
var ErrQueueLost = errors.New("pginbox/bullmq: the queue disappeared after the consumer had taken jobs from it")

// Stats counts what a Consumer saw since it was created.
type Stats struct {
	// QueuesLost is how many times the queue disappeared after Run had
	// taken jobs from it (each reported as ErrQueueLost).
	QueuesLost int64
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() Stats { return Stats{QueuesLost: c.queuesLost.Load()} }

// fieldConsumed is the field of the queue's meta hash a Consumer sets once
// it took a job: the meta hash goes with the rest of the queue's keys, so
// the field missing later means the queue was lost. Node ignores it.
const fieldConsumed = "pginbox-consumed"

// markScript sets fieldConsumed in the meta hash (KEYS[1]) and returns 1
// when it was missing.
var markScript = redis.NewScript(`
if redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1 then return 0 end
redis.call("HSET", KEYS[1], ARGV[1], "1")
return 1
`)

// markTaken marks the queue after this Run's first job: loss is then found.
func (c *Consumer) markTaken(ctx context.Context, loss *settle.Loss) error {
	if loss.Seen() {
		return nil
	}
	if err := markScript.Run(ctx, c.rdb, []string{c.keys.meta}, fieldConsumed).Err(); err != nil {
		return fmt.Errorf("pginbox/bullmq: marking the queue: %w", err)
	}
	loss.Found()
	return nil
}

// checkLost reports ErrQueueLost when the queue, marked since, lost its
// mark (and marks it again, so one loss is reported once). Run calls it
// when the queue has no job to take: a lost queue has none.
func (c *Consumer) checkLost(ctx context.Context, loss *settle.Loss) error {
	if !loss.Seen() {
		return nil
	}
	missing, err := markScript.Run(ctx, c.rdb, []string{c.keys.meta}, fieldConsumed).Int()
	if err != nil {
		return fmt.Errorf("pginbox/bullmq: checking the queue: %w", err)
	}
	if missing == 1 {
		loss.Report(ctx, fmt.Errorf("%w: %q (keys %s*): the jobs it held are gone; Run takes those added from now on", ErrQueueLost, c.cfg.Queue, c.keys.base))
	}
	loss.Found() // marked (again): the next loss is reported too
	return nil
}
