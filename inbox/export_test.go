package inbox

import "context"

// SetTestHooks installs crash-test hooks on w: afterClaim runs when a claim
// returned rows, beforeCommit after the completion update and before COMMIT.
func SetTestHooks(w *Worker, afterClaim func(claimed int), beforeCommit func(id ID)) {
	w.hooks.afterClaim, w.hooks.beforeCommit = afterClaim, beforeCommit
}

// StallHeartbeat makes w stop extending its leases, as a worker stalled by a
// long pause or a partition would.
func StallHeartbeat(w *Worker) { w.hooks.noHeartbeat = true }

// SetAfterCommitHook installs a crash-test hook that runs after a handler
// transaction committed.
func SetAfterCommitHook(w *Worker, afterCommit func(id ID)) { w.hooks.afterCommit = afterCommit }

// SetListedHook installs a hook that runs after each read of the scopes with
// due work on Citus, with the number of scopes it listed.
func SetListedHook(w *Worker, listed func(scopes int)) { w.hooks.listed = listed }

// SetBeforeListenHook installs a hook that runs before each LISTEN session
// subscribes, so a test can hold the subscription back.
func SetBeforeListenHook(w *Worker, beforeListen func()) { w.hooks.beforeListen = beforeListen }

// HeldLease is a receipt a worker claimed, for tests that claim by hand.
type HeldLease = *lease

// ClaimNow claims up to n due receipts for w, as its claim loop would.
func ClaimNow(ctx context.Context, w *Worker, n int) ([]HeldLease, error) {
	ls, _, err := w.claim(ctx, n, false)
	return ls, err
}

// RunTogether runs ls in one handler slot's run, as a slot that took them
// together would, and returns when they reached their outcomes.
func RunTogether(w *Worker, ls []HeldLease) { w.newRun(ls).execute() }

// GroupCommitQueued is how many calls wait in c's group commit queue, not
// yet taken into a batch.
func GroupCommitQueued(c *Client) int {
	c.group.mu.Lock()
	defer c.group.mu.Unlock()
	n := 0
	for _, call := range c.group.queue {
		if call != nil && call.state.Load() == callQueued {
			n++
		}
	}
	return n
}

// WorkerStopping reports whether Stop was called on w.
func WorkerStopping(w *Worker) bool { return w.life.Stopping() }
