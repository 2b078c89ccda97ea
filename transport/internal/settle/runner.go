package settle

import (
	"context"
	"sync"
)

// Runner gives a consumer its Close: embedded in the consumer, it lets Close
// end a Run in progress and wait for it to return. Run starts with
// ctx, end := c.Begin(ctx) and defers end().
type Runner struct {
	mu      sync.Mutex
	cancels []context.CancelFunc
	running sync.WaitGroup
	closed  bool
}

// Begin returns ctx, cancelled by Close, and the function Run defers.
func (r *Runner) Begin(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		cancel()
		return ctx, func() {}
	}
	r.cancels = append(r.cancels, cancel)
	r.running.Add(1)
	return ctx, func() { cancel(); r.running.Done() }
}

// Close ends every Run in progress, waits for them to return and makes later
// Runs return at once. It returns nil: a Run reports its own errors.
func (r *Runner) Close() error {
	r.mu.Lock()
	r.closed = true
	cancels := r.cancels
	r.cancels = nil
	r.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
	r.running.Wait()
	return nil
}
