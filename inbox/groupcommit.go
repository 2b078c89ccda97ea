package inbox

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Group commit: with Config.GroupCommit, Accept queues its prepared message and
// waits, and a few flushers send what is queued as one batch statement, which is
// also its commit. Flushers exist only while there is work, so a Client needs no
// Close. Under light load a call is flushed at once (a batch of one); under heavy
// load calls pile up while the flushers are busy, so batches grow by themselves.

// States of a queued call.
const (
	callQueued    int32 = iota
	callTaken           // in a batch being sent: its outcome is the batch's
	callAbandoned       // the caller gave up before it was sent
)

type groupCall struct {
	d     *draft
	state atomic.Int32
	done  chan struct{} // closed once res and err are set
	res   AcceptResult
	err   error
}

type groupCommitter struct {
	c          *Client
	maxBatch   int
	maxWait    time.Duration
	maxFlushes int

	mu       sync.Mutex
	queue    []*groupCall
	flushers int
	full     chan struct{} // wakes a flusher lingering for MaxWait when a batch is full
}

func newGroupCommitter(c *Client) *groupCommitter {
	flushes := c.cfg.GroupCommitFlushers
	return &groupCommitter{
		c:          c,
		maxBatch:   c.cfg.GroupCommitMaxBatch,
		maxWait:    c.cfg.GroupCommitMaxWait,
		maxFlushes: flushes,
		full:       make(chan struct{}, 1),
	}
}

// checkGroupCommitPool refuses more flushers than the pool has connections:
// each flush holds one, so the rest could never run.
func checkGroupCommitPool(c Config, maxConns int) error {
	flushers := c.GroupCommitFlushers
	if flushers == 0 {
		flushers = DefaultGroupCommitFlushers
	}
	if c.GroupCommit && flushers > maxConns {
		return &ConfigError{Field: "Config.GroupCommitFlushers", Detail: fmt.Sprintf("%d is more than the pool MaxConns %d (each flush holds a connection): lower it or raise pool_max_conns", flushers, maxConns)}
	}
	return nil
}

// accept queues p and waits for the batch it joins to commit.
func (g *groupCommitter) accept(ctx context.Context, d *draft) (AcceptResult, error) {
	if err := ctx.Err(); err != nil {
		return AcceptResult{}, fmt.Errorf("pginbox: accept: %w", err)
	}
	call := &groupCall{d: d, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, call)
	spawn := g.flushers < g.maxFlushes
	if spawn {
		g.flushers++
	}
	if len(g.queue) >= g.maxBatch {
		select {
		case g.full <- struct{}{}:
		default:
		}
	}
	g.mu.Unlock()
	if spawn {
		go g.flushLoop()
	}

	select {
	case <-call.done:
		return call.res, call.err
	case <-ctx.Done():
		if call.state.CompareAndSwap(callQueued, callAbandoned) {
			return AcceptResult{}, fmt.Errorf("pginbox: accept: %w", context.Cause(ctx))
		}
		// Already sent with its batch, which may still commit.
		return AcceptResult{}, fmt.Errorf("%w: %w", ErrCommitUncertain, context.Cause(ctx))
	}
}

func (g *groupCommitter) flushLoop() {
	for {
		batch := g.take()
		if batch == nil {
			return
		}
		g.flush(batch)
	}
}

// take removes the next batch from the queue, or retires the flusher and returns
// nil when there is nothing to send.
func (g *groupCommitter) take() []*groupCall {
	g.mu.Lock()
	if g.maxWait > 0 && len(g.queue) > 0 && len(g.queue) < g.maxBatch {
		// Linger for more calls, bounded by MaxWait, unless the batch fills first.
		g.mu.Unlock()
		t := time.NewTimer(g.maxWait)
		select {
		case <-t.C:
		case <-g.full:
		}
		t.Stop()
		g.mu.Lock()
	}
	defer g.mu.Unlock()
	var batch []*groupCall
	taken := 0
	for _, call := range g.queue {
		if len(batch) == g.maxBatch {
			break
		}
		taken++
		if call.state.CompareAndSwap(callQueued, callTaken) {
			batch = append(batch, call)
		}
	}
	// Clear the taken slots so the backing array does not pin finished calls.
	clear(g.queue[:taken])
	g.queue = g.queue[taken:]
	if len(g.queue) == 0 {
		g.queue = nil
	}
	if len(batch) == 0 && len(g.queue) == 0 {
		g.flushers--
		return nil
	}
	return batch
}

// flush accepts batch as one batch statement and hands every caller its own
// result; a failure of the batch is every caller's failure.
func (g *groupCommitter) flush(batch []*groupCall) {
	ctx, cancel := context.WithTimeout(context.Background(), bookkeepingTimeout) // it serves many callers
	defer cancel()
	set := func(pos int, it BatchItem) {
		call := batch[pos]
		switch it.Outcome {
		case Accepted, Duplicate:
			call.res = AcceptResult{Outcome: it.Outcome, ID: it.ID, Status: it.Status}
		default:
			call.err = it.Err
		}
	}
	for _, part := range g.c.byNode(ctx, batch) {
		if err := g.send(ctx, part, set); err != nil {
			for _, e := range part {
				batch[e.pos].res, batch[e.pos].err = AcceptResult{}, err
			}
		}
	}
	for _, call := range batch {
		close(call.done)
	}
}

// byNode splits a flush's calls into the batches it sends: one, or with
// Nodes one per Citus worker node, so that each commits on its node alone
// instead of across nodes in two phases (the callers' outcomes are
// independent). The calls whose node cannot be found go together, and
// fail with that error.
func (c *Client) byNode(ctx context.Context, batch []*groupCall) [][]batchEntry {
	entries := make([]batchEntry, len(batch))
	for i, call := range batch {
		entries[i] = batchEntry{pos: i, d: call.d}
	}
	if c.nodes == nil {
		return [][]batchEntry{entries}
	}
	var order []int
	parts := map[int][]batchEntry{}
	for _, e := range entries {
		i, err := c.nodes.n.Of(ctx, e.d.Identity.Scope)
		if err != nil {
			i = -1
		}
		if _, ok := parts[i]; !ok {
			order = append(order, i)
		}
		parts[i] = append(parts[i], e)
	}
	out := make([][]batchEntry, len(order))
	for k, i := range order {
		out[k] = parts[i]
	}
	return out
}

func (g *groupCommitter) send(ctx context.Context, entries []batchEntry, set func(int, BatchItem)) error {
	return g.c.acceptOwn(ctx, "accept", entries, set)
}
