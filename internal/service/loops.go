package service

import (
	"context"
	"sync"
)

// Loops runs a service's background goroutines on a context of their own (a
// loop outlives the ctx of the Start that began it) and says when they
// returned.
type Loops struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewLoops returns loops whose context is live until Stop.
func NewLoops() *Loops {
	ctx, cancel := context.WithCancel(context.Background())
	return &Loops{ctx: ctx, cancel: cancel}
}

// Go runs loop in a goroutine of its own with the loops' context.
func (l *Loops) Go(loop func(ctx context.Context)) {
	l.wg.Go(func() { loop(l.ctx) })
}

// Stop cancels the loops' context; Done says when they returned.
func (l *Loops) Stop() { l.cancel() }

// Done returns a channel closed once every loop returned.
func (l *Loops) Done() <-chan struct{} { return Done(&l.wg) }

// Done returns a channel closed once wg is done, for a select that also waits
// on a deadline.
func Done(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		wg.Wait()
		close(ch)
	}()
	return ch
}
