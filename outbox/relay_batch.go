package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/driver"
	"github.com/pginbox/pginbox/internal/errtext"
)

// claimRows claims up to BatchSize due events through the layout's driver.
func (r *Relay) claimRows(ctx context.Context) ([]db.OutboxClaimRow, error) {
	drv, err := r.driver(ctx)
	if err != nil {
		return nil, err
	}
	if r.claims == nil {
		r.claims = drv.NewClaimer(driver.RelayClaimerConfig{
			Lease: r.cfg.Lease,
			Listed: func(n int) {
				if r.hooks.listed != nil {
					r.hooks.listed(n)
				}
			},
		})
	}
	rows, err := r.claims.Claim(ctx, r.pool, r.cfg.BatchSize)
	if err != nil {
		return rows, dbError("outbox claim", err)
	}
	return rows, nil
}

// driver returns the layout's outbox driver, probing the first time.
func (r *Relay) driver(ctx context.Context) (driver.Outbox, error) {
	drv, err := r.drv.Get(ctx, r.pool)
	if err != nil {
		return nil, dbError("reading the outbox's layout (Citus or one server)", err)
	}
	return drv.Outbox(), nil
}

// bookkeepingTimeout bounds marking, failing and releasing, which must not
// inherit a cancelled context: an interrupted mark leaves a published event
// to lease expiry and a second publish.
const bookkeepingTimeout = 30 * time.Second

// batchLoop publishes batches until ctx ends: again at once after a batch
// that claimed anything (the batch's own later events of a key may be due
// now), otherwise after a notification or the poll interval.
func (r *Relay) batchLoop(ctx, pubCtx context.Context) {
	poll := time.NewTimer(r.cfg.PollInterval)
	defer poll.Stop()
	var watch restrictionWatch
	for {
		res, err := r.batch(ctx, pubCtx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.log.Error("pginbox relay: batch failed; retrying at the next poll", "error", err)
		} else if res.claimed > 0 {
			continue
		} else {
			r.watchRestriction(ctx, &watch)
		}
		poll.Reset(r.cfg.PollInterval)
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
			if r.claims != nil {
				r.claims.Woke(time.Now())
			}
		case <-poll.C:
		}
	}
}

// job is one claimed event on its way through a batch.
type job struct {
	msg   Message
	token ID // fences marking, failing and releasing
	seq   int64
	state jobState
	err   error // why the publish failed
}

type jobState int

const (
	jobHeld      jobState = iota // not attempted: released without spending an attempt
	jobPublished                 // the Publisher confirmed it
	jobFailed                    // the Publisher failed it: an attempt spent
)

type batchResult struct {
	claimed   int
	published int // marked PUBLISHED
}

// batch claims due events, publishes them and records the outcomes. ctx
// bounds the claim; pubCtx is the parent of the Publisher's context.
func (r *Relay) batch(ctx, pubCtx context.Context) (batchResult, error) {
	jobs, err := r.claim(ctx)
	if err != nil || len(jobs) == 0 {
		return batchResult{}, err
	}
	r.publish(pubCtx, jobs)
	if r.hooks.afterPublish != nil {
		var ids []ID
		for _, j := range jobs {
			if j.state == jobPublished {
				ids = append(ids, j.msg.ID)
			}
		}
		r.hooks.afterPublish(ids)
	}
	published, err := r.settle(jobs)
	return batchResult{claimed: len(jobs), published: published}, err
}

// claim takes up to BatchSize due events (see OutboxClaim for the ordering
// rules) and returns them in emit order.
func (r *Relay) claim(ctx context.Context) ([]*job, error) {
	rows, claimErr := r.claimRows(ctx)
	if claimErr != nil && len(rows) == 0 {
		return nil, claimErr
	}
	if claimErr != nil { // on Citus: some scopes failed, the others' claims are committed
		r.log.Error("pginbox relay: claiming from some scopes failed; publishing the others", "error", claimErr)
	}
	jobs := make([]*job, len(rows))
	for i, row := range rows {
		j := &job{token: row.ClaimToken, seq: row.Seq, msg: Message{
			ID:            row.ID,
			Source:        row.Source,
			Destination:   row.Destination,
			OrderingKey:   row.OrderingKey,
			EventType:     row.EventType,
			SchemaVersion: int(row.SchemaVersion),
			Payload:       json.RawMessage(row.Payload),
			EmittedAt:     row.CreatedAt,
			Attempt:       int(row.Attempts),
			Scope:         inbox.Scope{Kind: inbox.ScopeKind(row.ScopeKind), ID: row.ScopeID},
		}}
		if row.Metadata != "{}" {
			if err := json.Unmarshal([]byte(row.Metadata), &j.msg.Metadata); err != nil {
				j.state, j.err = jobFailed, handler.Permanent(fmt.Errorf("decoding the stored metadata: %w", err))
			}
		}
		jobs[i] = j
	}
	slices.SortFunc(jobs, func(a, b *job) int { return cmp.Compare(a.seq, b.seq) })
	return jobs, nil
}

// publish sends the jobs in rounds: round n carries the n-th claimed event
// of every ordering key (and round 0 every event without one), so a Publish
// call never holds two events of one key, and an event is sent only after
// the earlier events of its key in the batch were confirmed. A failure holds
// back the rest of its key. The rounds share one PublishTimeout.
func (r *Relay) publish(pubCtx context.Context, jobs []*job) {
	var rounds [][]*job
	next := map[string]int{}
	for _, j := range jobs {
		if j.state == jobFailed {
			continue // could not even be read
		}
		n := 0
		if k := j.msg.OrderingKey; k != "" {
			n = next[k]
			next[k]++
		}
		if n == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[n] = append(rounds[n], j)
	}
	ctx, cancel := context.WithTimeout(pubCtx, r.cfg.PublishTimeout)
	defer cancel()
	blocked := map[string]bool{}
	for _, round := range rounds {
		send := make([]*job, 0, len(round))
		for _, j := range round {
			if k := j.msg.OrderingKey; k == "" || !blocked[k] {
				send = append(send, j)
			}
		}
		if len(send) == 0 || ctx.Err() != nil {
			continue // held: released below
		}
		for i, err := range r.call(ctx, send) {
			j := send[i]
			if err == nil {
				j.state = jobPublished
				continue
			}
			j.state, j.err = jobFailed, err
			if k := j.msg.OrderingKey; k != "" {
				blocked[k] = true
			}
		}
	}
	// A publish that Stop interrupted is not the event's fault: release it.
	if errors.Is(context.Cause(pubCtx), errRelayStopping) {
		for _, j := range jobs {
			if j.state == jobFailed {
				j.state = jobHeld
			}
		}
	}
}

// call runs the Publisher on jobs and returns one error per job.
func (r *Relay) call(ctx context.Context, jobs []*job) (errs []error) {
	msgs := make([]Message, len(jobs))
	for i, j := range jobs {
		msgs[i] = j.msg
	}
	all := func(err error) []error {
		out := make([]error, len(jobs))
		for i := range out {
			out[i] = err
		}
		return out
	}
	defer func() {
		if p := recover(); p != nil {
			errs = all(fmt.Errorf("publisher panicked: %v\n%s", p, debug.Stack()))
		}
	}()
	errs = r.pub.Publish(ctx, msgs)
	switch {
	case errs == nil:
		return make([]error, len(jobs))
	case len(errs) != len(jobs):
		return all(fmt.Errorf("publisher returned %d results for %d messages: Publish must return nil or one error per message", len(errs), len(jobs)))
	}
	return errs
}

// settle records the jobs' outcomes: PUBLISHED, a failed attempt (retry or
// DEAD), or released. It returns how many it marked PUBLISHED.
func (r *Relay) settle(jobs []*job) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), bookkeepingTimeout)
	defer cancel()
	drv, err := r.driver(ctx) // the claim read the layout: known by now
	if err != nil {
		return 0, err
	}
	s := driver.Settlement{MaxAttempts: int32(r.cfg.MaxAttempts)}
	for _, j := range jobs {
		f := driver.Fence{ID: j.msg.ID.UUIDString(), Token: j.token.UUIDString(), ScopeID: j.msg.Scope.ID}
		switch j.state {
		case jobPublished:
			s.Published = append(s.Published, f)
		case jobHeld:
			s.Released = append(s.Released, f)
		case jobFailed:
			dead := handler.IsPermanent(j.err)
			var delay time.Duration
			if !dead && j.msg.Attempt < r.cfg.MaxAttempts {
				delay = r.cfg.Backoff(j.msg.Attempt)
			}
			s.Failed = append(s.Failed, driver.EventFailure{Fence: f, Error: errtext.Storable(j.err), Delay: delay, Dead: dead})
		}
	}
	res, err := drv.Settle(ctx, r.pool, s)
	if res.Lost > 0 {
		r.log.Warn("pginbox relay: leases lost before marking; those events will be published again", "lost", res.Lost)
	}
	if len(res.Failed) > 0 {
		r.logFailures(jobs, res.Failed)
	}
	if err != nil {
		return res.Marked, dbError("outbox settle", err)
	}
	return res.Marked, nil
}

// logFailures logs every event that went DEAD, and one line for those that
// will be retried.
func (r *Relay) logFailures(jobs []*job, rows []db.OutboxFailRow) {
	byID := make(map[ID]*job, len(jobs))
	for _, j := range jobs {
		byID[j.msg.ID] = j
	}
	retrying := 0
	var first *job
	var next time.Time
	for _, row := range rows {
		j := byID[row.ID]
		if row.Status == string(StatusDead) {
			r.log.Error("pginbox relay: event is DEAD", "event_id", j.msg.ID, "destination", j.msg.Destination,
				"event_type", j.msg.EventType, "attempt", j.msg.Attempt, "error", j.err)
			continue
		}
		retrying++
		if first == nil {
			first, next = j, row.AvailableAt
		}
	}
	if retrying > 0 {
		r.log.Warn("pginbox relay: publish failed, will retry", "events", retrying, "first_event_id", first.msg.ID,
			"destination", first.msg.Destination, "error", first.err, "available_at", next)
	}
}
