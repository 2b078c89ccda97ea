package redisstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"github.com/pginbox/pginbox/transport/internal/redisbase"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// Consumer moves entries from a Redis stream's consumer group into the
// inbox. Create it with New and run it with Run.
type Consumer struct {
	base redisbase.Base // Close, the retry loop, accepts
	rdb  redis.UniversalClient
	cfg  Config
	log  *slog.Logger

	groupLoss  settle.Loss // found each time Run creates the group or finds it there
	groupsLost atomic.Int64
}

// ErrGroupLost is reported (Config.OnError, an Error log line and
// Stats.GroupsLost) when the consumer group, or the whole stream, disappears
// after Run consumed from it: deleted, or lost in a restart of a Redis
// without persistence (appendonly no). Entries it held and had not delivered
// are gone, silently for Redis. Run recreates the group at the start of the
// stream and goes on; find out what removed it.
var ErrGroupLost = errors.New("pginbox/redisstream: the consumer group disappeared after the consumer had consumed from it")

// Stats counts what a Consumer saw since it was created.
type Stats struct {
	// GroupsLost is how many times the group (or stream) disappeared after
	// Run had consumed from it (each reported as ErrGroupLost).
	GroupsLost int64
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() Stats { return Stats{GroupsLost: c.groupsLost.Load()} }

// NewConsumer returns a consumer that accepts through acc (an *inbox.Client).
func NewConsumer(acc Accepter, cfg Config) (*Consumer, error) {
	cfg, err := cfgerr.Prepare("pginbox/redisstream: NewConsumer", acc, cfg, Config.withDefaults, Config.validate)
	if err != nil {
		return nil, err
	}
	c := &Consumer{
		base: redisbase.Base{Acc: acc, Pkg: "pginbox/redisstream", DeliveryLimit: cfg.DeliveryLimit, Words: redisbase.Words{
			Ack: "XACK", Reject: "dead-lettering", Retry: "the entry stays pending and is claimed again",
			Rejected: "moved to the dead-letter stream " + cfg.DeadLetterStream}},
		rdb: cfg.Redis,
		cfg: cfg,
		log: cfg.Logger.With("stream", cfg.Stream, "group", cfg.Group, "consumer", cfg.Consumer),
	}
	c.groupLoss = settle.Loss{Log: c.log, Message: "pginbox/redisstream: consumer group lost", OnError: cfg.OnError, Count: &c.groupsLost}
	return c, nil
}

// Close ends a Run in progress and waits for it to return (Run returns nil,
// as after a cancel); a later Run returns at once. It returns nil.
func (c *Consumer) Close() error { return c.base.Close() }

// Run consumes until ctx is cancelled, then finishes the entries it holds
// and returns nil. Redis errors (a lost connection, a server restart, a
// deleted group) are logged and retried with backoff.
func (c *Consumer) Run(ctx context.Context) error {
	ctx, end := c.base.Begin(ctx)
	defer end()
	groupReady := false
	nextClaim := time.Now()
	return c.base.Loop(ctx, c.log, func(ctx context.Context) error {
		if !groupReady {
			if err := c.createGroup(ctx); err != nil {
				return err
			}
			groupReady = true
			c.groupLoss.Found()
		}
		if !time.Now().Before(nextClaim) {
			if err := c.reclaim(ctx); err != nil {
				return err
			}
			nextClaim = time.Now().Add(c.cfg.ClaimIdle / 2)
		}
		return c.read(ctx)
	}, func(err error) {
		if isNoGroup(err) {
			c.groupLoss.Report(ctx, fmt.Errorf("%w: %q in stream %q: entries it held and had not delivered are gone; Run recreates it: %w", ErrGroupLost, c.cfg.Group, c.cfg.Stream, err))
			groupReady = false
		}
	})
}

// createGroup creates the group at the start of the stream (and the stream)
// unless it exists.
func (c *Consumer) createGroup(ctx context.Context) error {
	err := c.rdb.XGroupCreateMkStream(ctx, c.cfg.Stream, c.cfg.Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("pginbox/redisstream: creating group %q: %w", c.cfg.Group, err)
	}
	return nil
}

// isNoGroup reports a group (or stream) that does not exist, including a
// blocked read that Redis ended because the stream was deleted.
func isNoGroup(err error) bool {
	return strings.Contains(err.Error(), "NOGROUP") || strings.Contains(err.Error(), "UNBLOCKED")
}

// read handles the new entries one XREADGROUP returns.
func (c *Consumer) read(ctx context.Context) error {
	streams, err := c.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    c.cfg.Group,
		Consumer: c.cfg.Consumer,
		Streams:  []string{c.cfg.Stream, ">"},
		Count:    c.cfg.BatchSize,
		Block:    c.cfg.Block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil // nothing new within Block
	}
	if err != nil {
		return fmt.Errorf("pginbox/redisstream: XREADGROUP: %w", err)
	}
	for _, s := range streams {
		c.handleAll(ctx, s.Messages, nil)
	}
	return nil
}

// reclaim takes over the entries pending longer than ClaimIdle (retries, and
// entries of crashed consumers) with XAUTOCLAIM, reads their delivery counts
// with XPENDING, and handles or dead-letters them.
func (c *Consumer) reclaim(ctx context.Context) error {
	start := "0-0"
	for {
		msgs, next, err := c.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream:   c.cfg.Stream,
			Group:    c.cfg.Group,
			Consumer: c.cfg.Consumer,
			MinIdle:  c.cfg.ClaimIdle,
			Start:    start,
			Count:    c.cfg.BatchSize,
		}).Result()
		if err != nil {
			return fmt.Errorf("pginbox/redisstream: XAUTOCLAIM: %w", err)
		}
		if len(msgs) > 0 {
			counts, err := c.deliveries(ctx, msgs)
			if err != nil {
				return err
			}
			c.handleAll(ctx, msgs, counts)
		}
		if next == "0-0" || next == "" {
			return nil
		}
		start = next
	}
}

// deliveries reads the delivery counts of entries this consumer just
// claimed.
func (c *Consumer) deliveries(ctx context.Context, msgs []redis.XMessage) (map[string]int64, error) {
	pending, err := c.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream:   c.cfg.Stream,
		Group:    c.cfg.Group,
		Start:    msgs[0].ID,
		End:      msgs[len(msgs)-1].ID,
		Count:    int64(len(msgs)),
		Consumer: c.cfg.Consumer,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("pginbox/redisstream: XPENDING: %w", err)
	}
	counts := make(map[string]int64, len(pending))
	for _, p := range pending {
		counts[p.ID] = p.RetryCount
	}
	return counts, nil
}

// handleAll handles a batch concurrently. counts holds the delivery counts of
// claimed entries; nil means first deliveries.
func (c *Consumer) handleAll(ctx context.Context, msgs []redis.XMessage, counts map[string]int64) {
	var wg sync.WaitGroup
	for _, m := range msgs {
		delivered := int64(1)
		if counts != nil {
			n, ok := counts[m.ID]
			if !ok {
				continue // claimed by another consumer since, or acknowledged
			}
			delivered = n
		}
		wg.Go(func() { c.handle(ctx, m, delivered) })
	}
	wg.Wait()
}
