package inboxtest

import (
	"testing"

	"github.com/pginbox/pginbox/inbox"
)

// Drain runs w's handlers on every due receipt of its consumers, synchronously,
// until none is due, and returns how many it handled. Retries scheduled for
// later are not due yet. w must not be started. Any error fails the test.
func Drain(t testing.TB, w *inbox.Worker) int {
	t.Helper()
	n, err := w.Drain(t.Context())
	if err != nil {
		t.Fatalf("inboxtest.Drain: %v", err)
	}
	return n
}
