package inbox

// SetTestHooks installs crash-test hooks: afterClaim runs when a claim returned
// rows, beforeCommit after the completion update and before COMMIT. Not for
// concurrent tests: the hooks are global.
func SetTestHooks(afterClaim func(claimed int), beforeCommit func(id ID)) {
	testHookAfterClaim = afterClaim
	testHookBeforeCommit = beforeCommit
}
