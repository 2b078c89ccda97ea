package main

import (
	"context"
	"fmt"

	"github.com/pginbox/pginbox/cmd/inbox/internal/bench"
)

var benchCmd = &command{
	Name:    "bench",
	Args:    "[--json] [--scenarios LIST] [--database-url URL] [--fsync=false] [flags]",
	Summary: "measure pginbox against the raw SQL ceiling in the same run (see BENCHMARKS.md)",
	Help: `
Runs the benchmark scenarios (accept-fresh, accept-retained, accept-dup90,
accept-group, accept-batch, drain, retained-1m, relay) against DATABASE_URL, or an
ephemeral cluster with fsync on, and checks every scenario's counts in the
database. --scenarios also takes the timed worker scenarios: jobs (the drain
alone) and ingest (accepting while the worker drains), each with a -batched form. Exit code 1 means a correctness check failed; missing a performance
target is reported, not a failure. ` + "`inbox bench -h`" + ` lists every flag.`,
}

func init() {
	benchCmd.Run = runBench
	register(benchCmd)
}

// exitStatus carries an exit code decided by the command itself.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

func runBench(ctx context.Context, e *env, args []string) error {
	if code := bench.Command(ctx, args, e.stdout, e.stderr); code != 0 {
		return exitStatus(code)
	}
	return nil
}
