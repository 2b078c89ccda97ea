package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/testkit"
)

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as the testing package's does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a recorder in its own goroutine and returns the failure
// message, empty when f passed.
func run(f func(tb testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failed
}

func TestEventuallyWaitsForTheCondition(t *testing.T) {
	var n atomic.Int32
	msg := run(func(tb testing.TB) {
		testkit.Eventually(tb, time.Minute, func() bool { return n.Add(1) == 3 }, "three calls")
	})
	if msg != "" || n.Load() != 3 {
		t.Fatalf("failed %q after %d calls, want success after 3", msg, n.Load())
	}
}

func TestEventuallyFailsSayingWhatItWaitedFor(t *testing.T) {
	evaluated := false
	seen := testkit.Lazy(func() string { evaluated = true; return "status RETRYABLE" })
	msg := run(func(tb testing.TB) {
		testkit.Eventually(tb, 30*time.Millisecond, func() bool { return false }, "receipt %s COMPLETED; saw %v", "r1", seen)
	})
	if want := "timed out after 30ms waiting for receipt r1 COMPLETED; saw status RETRYABLE"; msg != want {
		t.Fatalf("failure %q, want %q", msg, want)
	}
	if !evaluated {
		t.Fatal("the Lazy argument was not printed")
	}
}

func TestLazyIsNotEvaluatedOnSuccess(t *testing.T) {
	msg := run(func(tb testing.TB) {
		testkit.Eventually(tb, time.Minute, func() bool { return true }, "%v", testkit.Lazy(func() string {
			panic("evaluated on success")
		}))
	})
	if msg != "" {
		t.Fatal(msg)
	}
}

func TestEventuallyNoErrorReportsTheLastError(t *testing.T) {
	calls := 0
	msg := run(func(tb testing.TB) {
		testkit.EventuallyNoError(tb, 30*time.Millisecond, func() error {
			calls++
			return fmt.Errorf("attempt %d refused", calls)
		}, "the insert")
	})
	if want := fmt.Sprintf("(last error: attempt %d refused)", calls); !strings.HasPrefix(msg, "timed out after 30ms waiting for the insert") || !strings.HasSuffix(msg, want) {
		t.Fatalf("failure %q, want the message and %q", msg, want)
	}
	var ok int
	msg = run(func(tb testing.TB) {
		testkit.EventuallyNoError(tb, time.Minute, func() error {
			if ok++; ok < 3 {
				return errors.New("not yet")
			}
			return nil
		}, "the insert")
	})
	if msg != "" || ok != 3 {
		t.Fatalf("failed %q after %d calls, want success after 3", msg, ok)
	}
}

func TestNeverFailsAsSoonAsTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	start := time.Now()
	msg := run(func(tb testing.TB) {
		testkit.Never(tb, time.Minute, func() bool { return n.Add(1) == 2 }, "a second delivery")
	})
	if msg != "within 1m0s: a second delivery" {
		t.Fatalf("failure %q", msg)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("Never took %v to see the condition", took)
	}
	if msg := run(func(tb testing.TB) {
		testkit.Never(tb, 30*time.Millisecond, func() bool { return false }, "nothing")
	}); msg != "" {
		t.Fatal(msg)
	}
}

func TestWaitFor(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	var got int
	if msg := run(func(tb testing.TB) { got = testkit.WaitFor(tb, ch, time.Minute, "a value") }); msg != "" || got != 7 {
		t.Fatalf("got %d, failure %q", got, msg)
	}
	closed := make(chan struct{})
	close(closed)
	if msg := run(func(tb testing.TB) { testkit.WaitFor(tb, closed, time.Minute, "the close") }); msg != "" {
		t.Fatal(msg)
	}
	msg := run(func(tb testing.TB) {
		testkit.WaitFor(tb, make(chan struct{}), 20*time.Millisecond, "the %s to start", "handler")
	})
	if want := "timed out after 20ms waiting for the handler to start"; msg != want {
		t.Fatalf("failure %q, want %q", msg, want)
	}
}

func TestWaitMatch(t *testing.T) {
	ch := make(chan string, 3)
	ch <- "claimed"
	ch <- "failed"
	ch <- "completed"
	var got string
	msg := run(func(tb testing.TB) {
		got = testkit.WaitMatch(tb, ch, time.Minute, func(s string) bool { return s == "completed" }, "completion")
	})
	if msg != "" || got != "completed" || len(ch) != 0 {
		t.Fatalf("got %q (%d left), failure %q", got, len(ch), msg)
	}
	close(ch)
	msg = run(func(tb testing.TB) {
		testkit.WaitMatch(tb, ch, time.Minute, func(string) bool { return true }, "an event")
	})
	if msg != "channel closed while waiting for an event" {
		t.Fatalf("failure %q", msg)
	}
	msg = run(func(tb testing.TB) {
		testkit.WaitMatch(tb, make(chan string), 20*time.Millisecond, func(string) bool { return true }, "an event")
	})
	if msg != "timed out after 20ms waiting for an event" {
		t.Fatalf("failure %q", msg)
	}
}

func TestWaitProcessGone(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	if testkit.ProcessGone(pid) {
		t.Fatal("a running process counts as gone")
	}
	// Not gone in time: killed, so it outlives no test, and reported.
	msg := run(func(tb testing.TB) { testkit.WaitProcessGone(tb, pid, 30*time.Millisecond, "the sleeper") })
	if want := fmt.Sprintf("process %d still running after 30ms: the sleeper", pid); msg != want {
		t.Fatalf("failure %q, want %q", msg, want)
	}
	testkit.WaitFor(t, exited, time.Minute, "the sleeper to die of SIGKILL")
	if !testkit.ProcessGone(pid) {
		t.Fatal("a reaped process counts as running")
	}

	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	// Not reaped yet: a zombie has exited.
	if msg := run(func(tb testing.TB) { testkit.WaitProcessGone(tb, zombie.Process.Pid, time.Minute, "true") }); msg != "" {
		t.Fatal(msg)
	}
}

func TestPaceEndsWithItsContext(t *testing.T) {
	if !testkit.Pace(t.Context(), time.Millisecond) {
		t.Fatal("Pace with a live context reported it done")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	if testkit.Pace(ctx, time.Hour) {
		t.Fatal("Pace with a done context reported it live")
	}
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("Pace took %v with a done context", took)
	}
}
