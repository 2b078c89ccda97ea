package service

import (
	"context"
	"time"
)

// Backoff spaces the attempts of a loop that retries, such as a transport
// consumer's reconnects: the wait doubles from Min with each failure in a
// row, up to Max, and starts over after a success, or after a failed attempt
// that had run longer than Reset. Not safe for concurrent use.
type Backoff struct {
	Min, Max time.Duration // the first wait, and the longest
	// Reset, if set, is how long an attempt must have run for its failure to
	// count as the first in a row again: a session that lasted was not
	// failing. Zero starts over only after Succeeded.
	Reset time.Duration

	failures int // in a row
	started  time.Time
}

// Start marks the start of an attempt, for Reset.
func (b *Backoff) Start() { b.started = time.Now() }

// Failed counts a failed attempt and returns the wait before the next one.
func (b *Backoff) Failed() time.Duration {
	if b.Reset > 0 && !b.started.IsZero() && time.Since(b.started) > b.Reset {
		b.failures = 0 // it ran for a while: start over
	}
	b.failures++
	d := b.Min
	for i := 1; i < b.failures && d > 0 && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Succeeded starts the waits over.
func (b *Backoff) Succeeded() { b.failures = 0 }

// Sleep waits d, or until ctx is done; it reports whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
