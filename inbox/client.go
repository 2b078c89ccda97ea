package inbox

import (
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/canonjson"
	"github.com/pginbox/pginbox/internal/driver"
)

// NotifyChannel is the PostgreSQL channel Accept notifies, with the consumer name
// as payload, so listening workers wake up without waiting for their next poll.
const NotifyChannel = "pginbox_receipt"

// Client accepts messages into the inbox. It is safe for concurrent use.
type Client struct {
	pool     *pgxpool.Pool
	cfg      Config
	declared map[string]bool
	limits   canonjson.Limits
	group    *groupCommitter // nil unless Config.GroupCommit
	wakeups  *wakeups
	nodes    *Nodes // nil: every session on pool
	closed   atomic.Bool
	// drv is the layout's driver, probed at the first accept.
	drv driver.Lazy
	// scopeAccepts is set once pginbox's row-level security refused an
	// unscoped Accept: from then on Accept applies the scope first. Until
	// then a deployment without tenancy pays nothing for it.
	scopeAccepts atomic.Bool

	acceptFn      AcceptFunc      // accept1 wrapped in Config.AcceptMiddleware
	acceptBatchFn AcceptBatchFunc // acceptBatch1 wrapped in Config.AcceptBatchMiddleware
}

// NewClient returns a Client on pool. It does not touch the database; the first
// Accept reports a missing schema. An invalid cfg is a *ConfigError.
func NewClient(pool *pgxpool.Pool, cfg Config) (*Client, error) {
	if pool == nil {
		return nil, errors.New("pginbox: NewClient: pool is nil: pass a *pgxpool.Pool from pgxpool.New")
	}
	if err := cfg.validate(int(pool.Config().MaxConns)); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Client{
		pool:    pool,
		cfg:     cfg,
		limits:  canonjson.Limits{MaxDepth: cfg.MaxPayloadDepth, MaxBytes: cfg.MaxPayloadBytes},
		wakeups: newWakeups(pool, cfg.Nodes, cfg.Logger),
		nodes:   cfg.Nodes,
		drv:     driver.Lazy{Log: shardNodeLog(cfg.Logger, cfg.Nodes)},
	}
	if cfg.GroupCommit {
		c.group = newGroupCommitter(c)
	}
	c.acceptFn = chainAccept(cfg.AcceptMiddleware, c.accept1)
	c.acceptBatchFn = chainAcceptBatch(cfg.AcceptBatchMiddleware, c.acceptBatch1)
	if len(cfg.Consumers) > 0 {
		c.declared = make(map[string]bool, len(cfg.Consumers))
		for _, name := range cfg.Consumers {
			c.declared[name] = true // validate checked the names
		}
	}
	return c, nil
}

// Close sends the wake-ups still owed to workers and makes later Accept calls
// fail with ErrClientClosed. Call it before closing the pool. Calls already
// running finish normally. Close is idempotent.
func (c *Client) Close() {
	if c.closed.Swap(true) {
		return
	}
	c.wakeups.close()
}
