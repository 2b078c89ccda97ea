// Package testkit holds the waits the repository's tests share: poll a
// condition, receive from a channel, wait for a process to end. Each has a
// deadline that only bounds a hang (nothing is measured by it) and fails the
// test with what it waited for and, when given, what it saw.
//
// Tests wait on conditions and events, not on time: a fixed sleep is either
// too short on a loaded machine (a flaky test) or too long everywhere else.
// A condition polled here, or a value received from a channel (a worker's
// event subscription, a handler's signal), is both.
//
// Nested modules of the repository import it too: an internal package of the
// root module is visible to every module under its path.
package testkit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/service"
)

// PollInterval is how often Eventually, EventuallyNoError and Never check.
const PollInterval = 10 * time.Millisecond

// Eventually polls cond every PollInterval until it holds, and returns how
// long that took. When timeout passes first it fails the test with "timed out
// after TIMEOUT waiting for " and the message of format and args. To say what
// was seen instead, pass a Lazy: it is evaluated only on failure.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) time.Duration {
	t.Helper()
	start := time.Now()
	if !Poll(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, fmt.Sprintf(format, args...))
	}
	return time.Since(start)
}

// Poll checks cond every PollInterval until it holds (true) or timeout
// passed (false). It checks at least once, and once more at the deadline.
// It is for waits that report instead of failing a test: code that returns
// an error, a cleanup.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(PollInterval) // the poll interval of every condition wait
	}
	return true
}

// EventuallyNoError calls f every PollInterval until it returns nil, and
// returns how long that took. When timeout passes first it fails the test
// with the message and f's last error.
func EventuallyNoError(t testing.TB, timeout time.Duration, f func() error, format string, args ...any) time.Duration {
	t.Helper()
	var last error
	d := Eventually(t, timeout, func() bool {
		last = f()
		return last == nil
	}, "%s (last error: %v)", Lazy(func() string { return fmt.Sprintf(format, args...) }), Lazy(func() string { return fmt.Sprint(last) }))
	return d
}

// Never polls cond every PollInterval for window and fails the test as soon
// as it holds. It is for claims that something does not happen, which have
// no event to wait on; prefer a barrier where there is one (an event that
// follows the one that must not happen), and say at the call why there is
// none.
func Never(t testing.TB, window time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if Poll(window, cond) {
		t.Fatalf("within %v: %s", window, fmt.Sprintf(format, args...))
	}
}

// WaitFor receives one value from ch and returns it. A closed channel counts
// as received (WaitFor returns the zero value), so it waits for a close too.
// When timeout passes first it fails the test.
func WaitFor[T any](t testing.TB, ch <-chan T, timeout time.Duration, format string, args ...any) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", timeout, fmt.Sprintf(format, args...))
	}
	var zero T
	return zero
}

// WaitMatch receives from ch until a value for which match is true, and
// returns it; the values before it are dropped. It fails the test when
// timeout passes first or ch is closed. Used with a worker's event
// subscription (inbox.Worker.Subscribe) it waits for what a worker did
// instead of polling the database for its traces.
func WaitMatch[T any](t testing.TB, ch <-chan T, timeout time.Duration, match func(T) bool, format string, args ...any) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed while waiting for %s", fmt.Sprintf(format, args...))
			}
			if match(v) {
				return v
			}
		case <-timer.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, fmt.Sprintf(format, args...))
		}
	}
}

// Pace waits d, or until ctx ends, and reports whether ctx is still live.
// It is for time that is itself the point, never for something a test
// could observe: the pacing of a load generator or a fault injector. A loop
// paced with it ends with its context, not a pause later.
func Pace(ctx context.Context, d time.Duration) bool {
	return service.Sleep(ctx, d)
}

// Lazy is an argument for a failure message that is computed only when the
// message is printed: a summary that costs queries, say.
type Lazy func() string

func (f Lazy) String() string { return f() }
