//go:build unix

package testkit

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ProcessGone reports whether process pid has exited. A zombie has: the
// PID 1 of a container may never reap an orphan, so signal 0 alone would
// call it alive.
func ProcessGone(pid int) bool {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		_, rest, _ := strings.Cut(string(b), ") ")
		return strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X")
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// WaitProcessGone waits until process pid has exited (ProcessGone). When
// timeout passes first it kills the process with SIGKILL, so it outlives no
// test, and fails the test.
func WaitProcessGone(t testing.TB, pid int, timeout time.Duration, format string, args ...any) {
	t.Helper()
	// A process that is not our child has no exit event to wait on: poll.
	if !Poll(timeout, func() bool { return ProcessGone(pid) }) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("process %d still running after %v: %s", pid, timeout, fmt.Sprintf(format, args...))
	}
}
