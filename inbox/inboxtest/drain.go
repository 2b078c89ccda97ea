package inboxtest

import (
	"testing"

	"github.com/pginbox/pginbox/inbox"
)

// Drain runs w's handlers on every due receipt of its consumers until none is
// due, and returns how many it handled; it returns when they are done. Like
// inbox.Worker.Drain it runs up to WorkerConfig.Concurrency handlers at once,
// in no guaranteed order: a test that needs one at a time sets Concurrency to
// 1. Retries scheduled for later are not due yet. w must not be started. Any
// error fails the test.
func Drain(t testing.TB, w *inbox.Worker) int {
	t.Helper()
	n, err := w.Drain(t.Context())
	if err != nil {
		t.Fatalf("inboxtest.Drain: %v", err)
	}
	return n
}
