package bullmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pginbox/pginbox/internal/service"
	"github.com/pginbox/pginbox/transport/internal/cfgerr"
	"github.com/pginbox/pginbox/transport/internal/redisbase"
	"github.com/pginbox/pginbox/transport/internal/settle"
)

// Consumer moves jobs from a BullMQ queue into the inbox. Create it with
// NewConsumer and run it with Run.
type Consumer struct {
	base redisbase.Base // Close, the retry loop, accepts
	rdb  redis.UniversalClient
	cfg  Config
	keys keys
	log  *slog.Logger

	queuesLost atomic.Int64
}

// NewConsumer returns a consumer that accepts through acc (an *inbox.Client).
func NewConsumer(acc Accepter, cfg Config) (*Consumer, error) {
	cfg, err := cfgerr.Prepare("pginbox/bullmq: NewConsumer", acc, cfg, Config.withDefaults, Config.validate)
	if err != nil {
		return nil, err
	}
	return &Consumer{
		base: redisbase.Base{Acc: acc, Pkg: "pginbox/bullmq", DeliveryLimit: cfg.DeliveryLimit,
			// The accept and the move after it (finishTimeout) stay within the lock.
			AcceptTimeout: cfg.LockDuration / 2,
			Words: redisbase.Words{Ack: "completing the job", Reject: "failing the job",
				Retry: "the job stays active and is taken again after its lock expires", Rejected: "job moved to failed"}},
		rdb:  cfg.Redis,
		cfg:  cfg,
		keys: queueKeys(cfg.Prefix, cfg.Queue),
		log:  cfg.Logger.With("queue", cfg.Queue, "worker", cfg.Worker),
	}, nil
}

// Close ends a Run in progress and waits for it to return (Run returns nil,
// as after a cancel); a later Run returns at once. It returns nil.
func (c *Consumer) Close() error { return c.base.Close() }

// Run consumes until ctx is cancelled, then finishes the jobs it holds and
// returns nil. Redis errors are logged and retried with backoff.
func (c *Consumer) Run(ctx context.Context) error {
	ctx, end := c.base.Begin(ctx)
	defer end()
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, c.cfg.Concurrency)
	nextStalledCheck := time.Now()
	// Found once this Run marked the queue (its first job).
	loss := &settle.Loss{Log: c.log, Message: "pginbox/bullmq: queue lost", OnError: c.cfg.OnError, Count: &c.queuesLost}
	return c.base.Loop(ctx, c.log, func(ctx context.Context) error {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		if !time.Now().Before(nextStalledCheck) {
			if err := c.moveStalled(ctx); err != nil {
				<-slots
				return err
			}
			nextStalledCheck = time.Now().Add(c.cfg.LockDuration / 2)
		}
		job, token, err := c.take(ctx)
		if err != nil || job == nil {
			<-slots
			if err == nil {
				err = c.checkLost(ctx, loss)
			}
			if err == nil {
				c.wait(ctx)
			}
			return err
		}
		if err := c.markTaken(ctx, loss); err != nil {
			// The job is taken: it is handled, and the mark set on the
			// next one.
			c.log.Warn("pginbox/bullmq: marking the queue failed", "err", err)
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			c.handle(ctx, *job, token)
		}()
		return nil
	}, nil)
}

// wait blocks until a producer marks the queue (BullMQ's marker sorted set)
// or Block passes. Redis clients block in whole seconds, so a Block under a
// second sleeps instead.
func (c *Consumer) wait(ctx context.Context) {
	if c.cfg.Block < time.Second {
		service.Sleep(ctx, c.cfg.Block)
		return
	}
	err := c.rdb.BZPopMin(ctx, c.cfg.Block, c.keys.marker).Err()
	if err != nil && !errors.Is(err, redis.Nil) && ctx.Err() == nil {
		c.log.Debug("pginbox/bullmq: waiting on the marker failed", "err", err)
		service.Sleep(ctx, c.cfg.Block)
	}
}

// take moves the next job to active under a new lock and returns it, or nil
// when there is none.
func (c *Consumer) take(ctx context.Context) (*Job, string, error) {
	token := newToken()
	k := c.keys
	res, err := takeScript.Run(ctx, c.rdb,
		[]string{k.wait, k.active, k.prioritized, k.events, k.meta, k.marker, k.delay, k.priorityCounter, k.paused},
		k.base, nowMillis(), token, c.cfg.LockDuration.Milliseconds(), c.cfg.Worker).Result()
	if errors.Is(err, redis.Nil) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("pginbox/bullmq: taking a job: %w", err)
	}
	pair, ok := res.([]any)
	if !ok || len(pair) != 2 {
		return nil, "", fmt.Errorf("pginbox/bullmq: taking a job: unexpected reply %v", res)
	}
	id, _ := pair[0].(string)
	flat, _ := pair[1].([]any)
	fields := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		fields[k] = v
	}
	ats, _ := strconv.ParseInt(fields["ats"], 10, 64)
	ts, _ := strconv.ParseInt(fields["timestamp"], 10, 64)
	return &Job{
		ID:              id,
		Name:            fields["name"],
		Data:            []byte(fields["data"]),
		Opts:            []byte(fields["opts"]),
		Timestamp:       time.UnixMilli(ts),
		AttemptsStarted: ats,
		Fields:          fields,
	}, token, nil
}

// moveStalled moves jobs whose lock expired back to wait.
func (c *Consumer) moveStalled(ctx context.Context) error {
	k := c.keys
	ids, err := stalledScript.Run(ctx, c.rdb,
		[]string{k.active, k.wait, k.paused, k.events, k.meta, k.marker, k.stalled}, k.base).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("pginbox/bullmq: moving stalled jobs: %w", err)
	}
	if len(ids) > 0 {
		c.log.Info("pginbox/bullmq: jobs whose lock expired moved back to wait", "jobs", ids)
	}
	return nil
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func nowMillis() int64 { return time.Now().UnixMilli() }
