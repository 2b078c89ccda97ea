package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pginbox/pginbox/cmd/inbox/internal/flagdoc"
	"github.com/pginbox/pginbox/cmd/inbox/internal/term"
)

// Command is `inbox bench`: it parses args, runs the suite and writes the
// report to stdout (a table, or one JSON object per scenario with --json) and
// progress to stderr. It returns the process exit code: 0 when every
// correctness check passed, 1 when one failed or the run broke, 2 for bad
// usage, 130 when ctx was cancelled (interrupt). Missing a performance target
// is reported, not a failure.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return CommandWithHooks(ctx, args, stdout, stderr, nil)
}

// CommandWithHooks is Command with Options.Hooks set: every accept and drain
// scenario also measures pginbox with the hooks installed.
func CommandWithHooks(ctx context.Context, args []string, stdout, stderr io.Writer, hooks *Hooks) int {
	fs := flag.NewFlagSet("inbox bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o                  Options
		fsync              = true
		asJSON             bool
		jsonFile           string
		quiet              bool
		scenarios          string
		drainConcur        string
		drainBatchedConcur string
		jobWorkers         string
	)
	fs.StringVar(&o.DatabaseURL, "database-url", os.Getenv("DATABASE_URL"), "disposable database to run against (default $DATABASE_URL; empty: an ephemeral cluster)")
	fs.BoolVar(&fsync, "fsync", true, "ephemeral cluster: keep fsync, synchronous_commit and full_page_writes on")
	fs.BoolVar(&o.Reset, "reset", false, "allow a database that holds receipts (the bench deletes them)")
	fs.BoolVar(&asJSON, "json", false, "write one JSON object per scenario instead of the table")
	fs.StringVar(&jsonFile, "json-file", "", "also write the JSON lines to this file (keeps the table on stdout)")
	fs.BoolVar(&quiet, "quiet", false, "no progress on stderr")
	fs.StringVar(&scenarios, "scenarios", strings.Join(DefaultScenarios, ","), "comma-separated scenarios to run (also: citus, jobs, jobs-batched, ingest, ingest-batched, ingest-accept, ingest-accept-batched)")
	fs.IntVar(&o.Rounds, "rounds", 3, "alternating pginbox/raw rounds per scenario")
	fs.IntVar(&o.Calls, "calls", 2000, "accept calls per phase")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "accept callers (accept-fresh, -retained, -dup90, -batch, retained-1m, ingest-accept)")
	fs.IntVar(&o.Retained, "retained", 10_000, "receipts retained before accept-retained and accept-dup90")
	fs.IntVar(&o.GroupCallers, "group-callers", 64, "accept-group callers")
	fs.IntVar(&o.GroupCalls, "group-calls", 0, "accept-group calls per phase (default 5 x --calls)")
	fs.IntVar(&o.GroupFlushers, "group-flushers", 0, "accept-group's Config.GroupCommitFlushers (0: the client's default)")
	fs.IntVar(&o.BatchSize, "batch-size", 100, "messages per accept-batch and citus-accept-batch call")
	fs.IntVar(&o.Batches, "batches", 200, "accept-batch and citus-accept-batch calls per phase")
	fs.IntVar(&o.DrainMessages, "drain-messages", 0, "receipts per drain phase (default --calls)")
	fs.IntVar(&o.OrderedMessages, "ordered-messages", 0, "receipts per phase of ordered (default 10,000: 1,000 keys of 10, then 10 hot keys)")
	fs.StringVar(&drainConcur, "drain-concurrency", "4,16", "comma-separated worker concurrencies for drain")
	fs.IntVar(&o.DrainBatch, "drain-batch", 10, "messages per handler transaction in drain-batched, jobs-batched, ingest-*-batched and citus's drains")
	fs.StringVar(&drainBatchedConcur, "drain-batched-concurrency", "4,16", "comma-separated worker concurrencies for drain-batched and citus's drains")
	fs.StringVar(&jobWorkers, "job-workers", "4,16,64", "comma-separated worker concurrencies for jobs and ingest scenarios")
	fs.IntVar(&o.JobBacklog, "job-backlog", 4000, "receipts kept due in jobs and ingest scenarios")
	fs.DurationVar(&o.JobSleep, "job-sleep", time.Millisecond, "what a no-op job handler waits")
	fs.DurationVar(&o.JobDuration, "job-duration", 20*time.Second, "measured time per jobs or ingest phase")
	fs.DurationVar(&o.JobWarmup, "job-warmup", 10*time.Second, "unmeasured time before each jobs or ingest phase")
	fs.IntVar(&o.IngestBatch, "ingest-batch", 128, "messages per AcceptBatch call in ingest and ingest-batched")
	fs.IntVar(&o.IngestCallers, "ingest-callers", 1, "producers calling AcceptBatch at once in ingest and ingest-batched")
	fs.IntVar(&o.IngestTenants, "ingest-tenants", 1, "tenant scopes the ingested messages spread over, round robin")
	fs.IntVar(&o.CitusTenants, "citus-tenants", 16, "tenant scopes the citus scenario's messages spread over, round robin")
	fs.IntVar(&o.ClaimBatch, "claim-batch", 0, "WorkerConfig.ClaimBatch of the ingest and fairness workers (0: the worker's default)")
	fs.IntVar(&o.ClaimScopes, "claim-scopes", 0, "WorkerConfig.ClaimScopes of the fairness worker (0: the worker's default)")
	fs.IntVar(&o.RetainedRows, "retained-rows", 1_000_000, "COMPLETED receipts in retained-1m")
	fs.StringVar(&o.ProfileDir, "profile", "", "write a CPU profile, a pg_stat_statements report, sampled wait events and a CPU account of every pginbox accept, drain, ordered, jobs and ingest phase (and of the raw accept and drain loops) to this directory")
	fs.DurationVar(&o.Hold, "hold", 30*time.Second, "xmin-hold: how long an idle transaction holds the xmin horizon")
	fs.DurationVar(&o.HoldAround, "hold-around", 10*time.Second, "xmin-hold: load before and after the hold")
	fs.IntVar(&o.HoldRate, "hold-rate", 200, "xmin-hold: accepts per second")
	fs.BoolVar(&o.RLS, "rls", false, "accept and drain scenarios also run with row-level security enabled (application and system roles), reported against RLS off")
	fs.IntVar(&o.RelayEvents, "relay-events", 0, "outbox events per relay phase (default --calls)")
	fs.IntVar(&o.Relays, "relays", 2, "relays publishing at once in relay")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: inbox bench [flags]\n\n"+
			"Measures pginbox against the raw SQL ceiling (the same statements from a plain pgx loop)\n"+
			"in the same run, and checks every scenario's counts in the database.\n"+
			"Scenarios: %s\n\nFlags:\n", strings.Join(Scenarios, ", "))
		flagdoc.Print(stderr, fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "inbox bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	o.NoFsync = !fsync
	o.Hooks = hooks
	for _, name := range strings.Split(scenarios, ",") {
		if name = strings.TrimSpace(name); name != "" {
			o.Scenarios = append(o.Scenarios, name)
		}
	}
	for _, f := range []struct {
		flag string
		text string
		into *[]int
	}{
		{"drain-concurrency", drainConcur, &o.DrainConcurrency},
		{"drain-batched-concurrency", drainBatchedConcur, &o.DrainBatchedConcurrency},
		{"job-workers", jobWorkers, &o.JobWorkers},
	} {
		for _, c := range strings.Split(f.text, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(c))
			if err != nil || n < 1 || n > 1000 {
				fmt.Fprintf(stderr, "inbox bench: --%s: %q is not a number from 1 to 1000\n", f.flag, c)
				return 2
			}
			*f.into = append(*f.into, n)
		}
	}
	if !quiet {
		o.Progress = stderr
		o.TTY = term.IsTerminal(stderr)
	}
	if o.DatabaseURL != "" && !fsync {
		fmt.Fprintln(stderr, "inbox bench: --fsync=false applies to the ephemeral cluster only; the server's own settings are used and reported")
	}

	rep, err := Run(ctx, o)
	if rep != nil && len(rep.Results) > 0 {
		var werr error
		if asJSON {
			werr = WriteJSON(stdout, rep)
		} else {
			werr = WriteTable(stdout, rep)
		}
		if werr == nil && jsonFile != "" {
			werr = writeJSONFile(jsonFile, rep)
		}
		if werr != nil {
			fmt.Fprintf(stderr, "inbox bench: writing the report: %v\n", werr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "inbox bench: %v\n", err)
		if ctx.Err() != nil {
			return 130 // interrupted, as the other inbox commands report it
		}
		return 1
	}
	if !rep.OK() {
		fmt.Fprintln(stderr, "inbox bench: FAILED: a correctness check failed (see the report)")
		return 1
	}
	return 0
}

func writeJSONFile(path string, rep *Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteJSON(f, rep); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
