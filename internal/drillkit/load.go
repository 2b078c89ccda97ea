package drillkit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pginbox/pginbox/inbox"
)

// Load accepts messages 0..Count-1 the way a transport delivers them: a
// delivery that is not acknowledged (ActionRetry) is redelivered after
// RedeliverAfter until it is, or until GiveUpAfter.
type Load struct {
	Client  *inbox.Client             // accepts the messages
	Message func(i int) inbox.Message // defaults to Message
	Count   int                       // messages; the load is bounded by it
	Senders int                       // concurrent deliveries; defaults to 4
	// Rate caps first deliveries per second over all senders. Defaults to
	// no cap.
	Rate float64
	// AttemptTimeout bounds one Accept. Defaults to 5s.
	AttemptTimeout time.Duration
	// RedeliverAfter is the pause before a redelivery. Defaults to 50ms.
	RedeliverAfter time.Duration
	// GiveUpAfter ends the redeliveries of one message. Defaults to 2m.
	GiveUpAfter time.Duration
}

// Outcome is what happened to the deliveries.
type Outcome struct {
	Planned   int         // messages the load was told to deliver (Load.Count)
	Sent      int         // messages delivered at least once
	Attempts  int         // Accept calls
	Acked     []string    // message IDs acknowledged, in order
	AckedAt   []time.Time // when each of Acked was acknowledged
	Uncertain int         // attempts that returned ErrCommitUncertain
	Retryable int         // other attempts that said ActionRetry
	Rejected  int         // attempts that said ActionReject (never expected)
	GaveUp    []string    // message IDs never acknowledged
	// Errors holds the first text of each error class seen.
	Errors map[string]string
	// Codes counts failed attempts by SQLSTATE ("" for errors without one,
	// such as a lost connection).
	Codes map[string]int
}

// FirstAckAfter is the time of the first acknowledgement after t, and
// whether there was one.
func (o Outcome) FirstAckAfter(t time.Time) (time.Time, bool) {
	for _, at := range o.AckedAt {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

// Running is a load in progress.
type Running struct {
	mu   sync.Mutex
	out  Outcome
	done chan struct{}
}

// Start starts the load; cancelling ctx stops new deliveries and
// redeliveries.
func (l Load) Start(ctx context.Context) *Running {
	if l.Message == nil {
		l.Message = Message
	}
	if l.Senders <= 0 {
		l.Senders = 4
	}
	if l.AttemptTimeout <= 0 {
		l.AttemptTimeout = 5 * time.Second
	}
	if l.RedeliverAfter <= 0 {
		l.RedeliverAfter = 50 * time.Millisecond
	}
	if l.GiveUpAfter <= 0 {
		l.GiveUpAfter = 2 * time.Minute
	}
	r := &Running{done: make(chan struct{}), out: Outcome{Planned: l.Count, Errors: map[string]string{}, Codes: map[string]int{}}}
	next := make(chan int)
	go func() {
		defer close(next)
		t0 := time.Now()
		for i := range l.Count {
			if l.Rate > 0 {
				due := t0.Add(time.Duration(float64(i) / l.Rate * float64(time.Second)))
				if !sleepUntil(ctx, due) {
					return
				}
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range l.Senders {
		wg.Go(func() {
			for i := range next {
				l.deliver(ctx, r, i)
			}
		})
	}
	go func() {
		wg.Wait()
		close(r.done)
	}()
	return r
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// deliver accepts message i until it is acknowledged.
func (l Load) deliver(ctx context.Context, r *Running, i int) {
	msg := l.Message(i)
	r.record(func(o *Outcome) { o.Sent++ })
	giveUp := time.Now().Add(l.GiveUpAfter)
	for {
		actx, cancel := context.WithTimeout(ctx, l.AttemptTimeout)
		_, err := l.Client.Accept(actx, msg)
		cancel()
		at := time.Now()
		r.record(func(o *Outcome) {
			o.Attempts++
			switch {
			case err == nil:
				o.Acked = append(o.Acked, msg.MessageID)
				o.AckedAt = append(o.AckedAt, at)
			case inbox.ActionFor(err) == inbox.ActionReject:
				o.Rejected++
				o.note("reject", err)
			case errors.Is(err, inbox.ErrCommitUncertain):
				o.Uncertain++
				o.note("uncertain", err)
			default:
				o.Retryable++
				o.note("retry", err)
			}
		})
		if err == nil || inbox.ActionFor(err) == inbox.ActionReject {
			return
		}
		if at.After(giveUp) || !sleepUntil(ctx, at.Add(l.RedeliverAfter)) {
			r.record(func(o *Outcome) { o.GaveUp = append(o.GaveUp, msg.MessageID) })
			return
		}
	}
}

func (o *Outcome) note(class string, err error) {
	if _, ok := o.Errors[class]; !ok {
		o.Errors[class] = err.Error()
	}
	var pgErr *pgconn.PgError
	errors.As(err, &pgErr)
	if pgErr != nil {
		o.Codes[pgErr.Code]++
	} else {
		o.Codes[""]++
	}
}

func (r *Running) record(f func(*Outcome)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.out)
}

// Snapshot returns the outcome so far.
func (r *Running) Snapshot() Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.out
	o.Acked = append([]string(nil), o.Acked...)
	o.AckedAt = append([]time.Time(nil), o.AckedAt...)
	o.GaveUp = append([]string(nil), o.GaveUp...)
	o.Errors = maps.Clone(r.out.Errors)
	o.Codes = maps.Clone(r.out.Codes)
	return o
}

// Wait waits until every message was acknowledged or given up, or ctx
// ends, and returns the outcome.
func (r *Running) Wait(ctx context.Context) (Outcome, error) {
	select {
	case <-r.done:
		return r.Snapshot(), nil
	case <-ctx.Done():
		return r.Snapshot(), fmt.Errorf("drillkit: load still running: %w", context.Cause(ctx))
	}
}
