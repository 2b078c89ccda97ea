package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pginbox/pginbox/internal/service"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

const commitTimeout = 10 * time.Second

// Consumer consumes topics into the inbox as one member of a consumer group.
// Create it with NewConsumer and call Run.
type Consumer struct {
	runner settle.Runner // lets Close end Run
	acc    Accepter
	cfg    Config

	mu      sync.Mutex
	pending offsets // accepted, not yet committed

	attempts settle.Attempts[recordKey] // failed accepts of a record alone, for DeliveryLimit

	acked, deadLettered, rewinds, committed, topicsLost atomic.Int64

	losses map[string]*settle.Loss // Run's, by topic: found when records are read from it
}

// offsets are the next offsets to read, per topic and partition.
type offsets map[string]map[int32]kgo.EpochOffset

func (o offsets) set(topic string, partition int32, eo kgo.EpochOffset) {
	if o[topic] == nil {
		o[topic] = map[int32]kgo.EpochOffset{}
	}
	o[topic][partition] = eo
}

// Stats counts what a Consumer did since it was created.
type Stats struct {
	Acked        int64 // records accepted or duplicate, offsets past them queued for commit
	DeadLettered int64 // records produced to the dead-letter topic
	Rewinds      int64 // partitions rewound to re-read a record that was not accepted
	Commits      int64 // successful offset commits
	TopicsLost   int64 // topics that disappeared after Run read from them (ErrTopicLost)
}

// ErrTopicLost is reported (Config.OnError, an Error log line and
// Stats.TopicsLost) when a topic Run read records from is no longer known
// to the cluster: deleted, or lost with a broker's data. The records it
// held are gone. Run keeps polling and reads it again once it exists.
var ErrTopicLost = errors.New("pginbox/kafka: the topic disappeared after the consumer had read from it")

// NewConsumer returns a consumer that accepts through acc (an *inbox.Client).
func NewConsumer(acc Accepter, cfg Config) (*Consumer, error) {
	cfg, err := cfgerr.Prepare("pginbox/kafka: NewConsumer", acc, cfg, Config.withDefaults, Config.validate)
	if err != nil {
		return nil, err
	}
	return &Consumer{acc: acc, cfg: cfg, pending: offsets{}, losses: map[string]*settle.Loss{}}, nil
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() Stats {
	return Stats{Acked: c.acked.Load(), DeadLettered: c.deadLettered.Load(), Rewinds: c.rewinds.Load(), Commits: c.committed.Load(),
		TopicsLost: c.topicsLost.Load()}
}

// Close ends a Run in progress and waits for it to return (Run returns nil,
// as after a cancel); a later Run returns at once. It returns nil.
func (c *Consumer) Close() error { return c.runner.Close() }

// Run consumes until ctx is done, then commits what was accepted, leaves the
// group and returns nil. It returns an error only when the client cannot be
// created from the configuration.
func (c *Consumer) Run(ctx context.Context) error {
	ctx, end := c.runner.Begin(ctx)
	defer end()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.ConsumerGroup(c.cfg.Group),
		kgo.ConsumeTopics(c.cfg.Topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.lost),
	}, c.cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("pginbox/kafka: creating the client: %w", err)
	}
	defer cl.Close() // leaves the group; revoked commits what is pending

	retry := service.Backoff{Min: c.cfg.RetryDelay, Max: c.cfg.MaxRetryDelay} // failed batches
	for {
		pctx, cancel := c.pollContext(ctx)
		fetches := cl.PollRecords(pctx, c.cfg.MaxBatch)
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			cl.AllowRebalance()
			return nil
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) {
				return // pollContext's: time to commit again
			}
			if c.topicGone(ctx, topic, err) {
				return
			}
			c.cfg.Logger.WarnContext(ctx, "pginbox/kafka: fetch error", "topic", topic, "partition", partition, "err", err)
		})
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				c.topicLoss(p.Topic).Found() // read from (again): a later loss is reported
			}
		})
		ok := c.process(ctx, cl, fetches)
		c.commit(ctx, cl, nil)
		cl.AllowRebalance()
		if ok {
			retry.Succeeded()
			continue
		}
		service.Sleep(ctx, retry.Failed())
	}
}

// commitRetry is how long a poll waits for records while offsets are
// pending: a refused or failed commit (a restarted broker that lost the
// group's members answers ILLEGAL_GENERATION) is tried again after it, not
// only when more records arrive, which on a quiet topic may be never.
const commitRetry = time.Second

// pollContext bounds the next poll by commitRetry while offsets are
// pending.
func (c *Consumer) pollContext(ctx context.Context) (context.Context, context.CancelFunc) {
	c.mu.Lock()
	pending := false
	for _, parts := range c.pending {
		pending = pending || len(parts) > 0
	}
	c.mu.Unlock()
	if !pending {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, commitRetry)
}

// topicGone reports err when it says a topic Run read from no longer
// exists, once per loss, and says whether it did.
func (c *Consumer) topicGone(ctx context.Context, topic string, err error) bool {
	if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.UnknownTopicID) {
		return false
	}
	// Not reported when never read from, or already reported.
	c.topicLoss(topic).Report(ctx, fmt.Errorf("%w: %q: the records it held are gone; Run reads it again once it exists: %w", ErrTopicLost, topic, err))
	return true
}

// topicLoss returns the loss reporter of topic.
func (c *Consumer) topicLoss(topic string) *settle.Loss {
	l := c.losses[topic]
	if l == nil {
		l = &settle.Loss{Log: c.cfg.Logger.With("topic", topic), Message: "pginbox/kafka: topic lost", OnError: c.cfg.OnError, Count: &c.topicsLost}
		c.losses[topic] = l
	}
	return l
}

// process accepts every partition of fetches concurrently, queues the
// accepted offsets and rewinds partitions that stopped at a record. It
// reports whether every partition went through.
func (c *Consumer) process(ctx context.Context, cl *kgo.Client, fetches kgo.Fetches) bool {
	var wg sync.WaitGroup
	var failed atomic.Bool
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		wg.Go(func() {
			through, stop := c.partition(ctx, cl, p.Topic, p.Partition, p.Records)
			c.mu.Lock()
			if through != nil {
				c.pending.set(p.Topic, p.Partition, kgo.EpochOffset{Epoch: through.LeaderEpoch, Offset: through.Offset + 1})
			}
			c.mu.Unlock()
			if stop != nil {
				failed.Store(true)
				c.rewinds.Add(1)
				// Called before AllowRebalance, as franz-go requires.
				cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{p.Topic: {p.Partition: {Epoch: stop.LeaderEpoch, Offset: stop.Offset}}})
			}
		})
	})
	wg.Wait()
	return !failed.Load()
}

// commit commits the pending offsets (of the given partitions only, when
// only is not nil) and forgets those that committed.
func (c *Consumer) commit(ctx context.Context, cl *kgo.Client, only map[string][]int32) {
	c.mu.Lock()
	todo := offsets{}
	for topic, parts := range c.pending {
		for p, eo := range parts {
			if only == nil || contains(only[topic], p) {
				todo.set(topic, p, eo)
			}
		}
	}
	c.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	cl.CommitOffsetsSync(cctx, todo, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			c.cfg.Logger.WarnContext(ctx, "pginbox/kafka: offset commit failed; the records will be read again and be duplicates", "err", err)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					c.cfg.Logger.WarnContext(ctx, "pginbox/kafka: offset commit refused", "topic", t.Topic, "partition", p.Partition, "err", err)
					continue
				}
				// Forget it unless a newer offset was queued meanwhile.
				if cur, ok := c.pending[t.Topic][p.Partition]; ok && cur == todo[t.Topic][p.Partition] {
					delete(c.pending[t.Topic], p.Partition)
				}
			}
		}
		c.committed.Add(1)
	})
}

// revoked commits what was accepted on the revoked partitions, then forgets
// them. Rebalances wait for polls to finish, so no batch is in flight.
func (c *Consumer) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	c.commit(ctx, cl, revoked)
	c.lost(ctx, cl, revoked)
}

// lost forgets partitions that can no longer be committed: their records
// will be read again by their new owner, and be duplicates.
func (c *Consumer) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, parts := range lost {
		for _, p := range parts {
			delete(c.pending[topic], p)
		}
	}
}

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
