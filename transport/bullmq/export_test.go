package bullmq

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// AddJob adds a job the way BullMQ's Queue.add does with a chosen job ID, in
// one script (the Publisher's). The conformance suite adds hundreds of jobs
// one at a time, which a Node process per job would make too slow; the
// tests driving the Node fixture show that Node's adds and this one agree.
func AddJob(ctx context.Context, rdb redis.UniversalClient, queue, id, name, data string) (added bool, err error) {
	k := queueKeys(DefaultPrefix, queue)
	n, err := addScript.Run(ctx, rdb, []string{k.wait, k.paused, k.meta, k.events, k.marker},
		k.base, id, name, data, `{"attempts":1}`, nowMillis()).Int()
	return n == 1, err
}
