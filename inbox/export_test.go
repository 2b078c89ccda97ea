package inbox

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
