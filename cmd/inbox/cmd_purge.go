package main

import (
	"context"
	"fmt"
	"time"

	"github.com/pginbox/pginbox/inbox"
)

var purgeCmd = &command{
	Name:    "purge",
	Args:    "--older-than AGE [--batch-size N] [--pause D] [--dry-run] [--json]",
	Summary: "drop payloads of COMPLETED receipts past retention, in batches",
	Help: `
Purge drops the payload of every COMPLETED receipt completed more than AGE ago
(720h, 30d, ...; at most 36500d, 100 years), BATCH-SIZE receipts per short
transaction. Identity, fingerprint, metadata and lineage stay, so a redelivery
of a purged message is still a duplicate and a changed one still a conflict;
purged receipts cannot be replayed. Safe to run while workers run, from cron,
and to interrupt: finished batches stay committed and the next run carries on.

The cutoff is now minus AGE, by this machine's clock, and is printed with the
result. --dry-run counts what a run would purge now and changes nothing.

With --json, a run and a dry run print the same object:
  {
    "dry_run": false,                   true for --dry-run
    "cutoff": "2024-05-01T12:00:00Z",   receipts completed before it are purged
    "batch_size": 1000,
    "purged": 1234,                     payloads purged (a dry run: would be)
    "batches": 2,                       batches that purged any (a dry run: would)
    "elapsed_seconds": 0.42
  }`,
}

func init() {
	purgeCmd.Run = runPurge
	register(purgeCmd)
}

type jsonPurge struct {
	DryRun         bool      `json:"dry_run"`
	Cutoff         time.Time `json:"cutoff"`
	BatchSize      int       `json:"batch_size"`
	Purged         int64     `json:"purged"`
	Batches        int       `json:"batches"`
	ElapsedSeconds float64   `json:"elapsed_seconds"`
}

// text is the result line, with the same facts as the JSON.
func (p jsonPurge) text() string {
	batches := fmt.Sprintf("%s of at most %d (%s); cutoff: completed before %s",
		count(p.Batches, "batch", "batches"), p.BatchSize, fmtAge(time.Duration(p.ElapsedSeconds*float64(time.Second))), fmtTime(p.Cutoff))
	if p.DryRun {
		return fmt.Sprintf("dry run: would purge %s in %s; nothing changed", count(p.Purged, "payload", "payloads"), batches)
	}
	return fmt.Sprintf("purged %s in %s", count(p.Purged, "payload", "payloads"), batches)
}

func runPurge(ctx context.Context, e *env, args []string) error {
	fs := newFlags(purgeCmd)
	var d dbFlags
	var s scopeFlags
	d.add(fs)
	s.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	olderThan := &durationFlag{min: 1, max: maxAge, want: wantRetention}
	fs.Var(olderThan, "older-than", "retention: purge receipts completed more than `AGE` ago, e.g. 720h or 30d, at most 36500d (required)")
	batch := numberVar(fs, "batch-size", inbox.DefaultPurgeBatchSize, 1, inbox.MaxPurgeBatchSize,
		fmt.Sprintf("`N` receipts per batch, 1 to %d", inbox.MaxPurgeBatchSize))
	pause := &durationFlag{max: maxPause, want: wantPause}
	fs.Var(pause, "pause", "rest for `D` between batches, to spare replicas and autovacuum; 0 to 1h")
	dryRun := fs.Bool("dry-run", false, "only count what would be purged")
	pos, err := parseFlags(e, purgeCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if !olderThan.set {
		return usagef("--older-than is required: the retention period, e.g. --older-than 720h")
	}
	view, closeDB, err := adminFor(ctx, e, &d, &s)
	if err != nil {
		return err
	}
	defer closeDB()
	// The CLI fixes the cutoff itself, to the second, so the time it prints is
	// exactly the one it used.
	out := jsonPurge{DryRun: *dryRun, Cutoff: time.Now().Add(-olderThan.d).UTC().Truncate(time.Second), BatchSize: int(batch.n)}
	p := inbox.PurgeParams{Before: out.Cutoff, BatchSize: out.BatchSize, Pause: pause.d}
	start := time.Now()

	if *dryRun {
		n, _, err := view.PurgeCount(ctx, p)
		if err != nil {
			return err
		}
		out.Purged, out.Batches = n, int((n+int64(out.BatchSize)-1)/int64(out.BatchSize))
	} else {
		line := newLiveLine(e)
		if !*asJSON {
			lastPrint := time.Time{}
			p.Progress = func(r inbox.PurgeResult) {
				// A line per second is enough in a log; a terminal redraws each batch.
				if !e.tty && time.Since(lastPrint) < time.Second {
					return
				}
				lastPrint = time.Now()
				line.set(fmt.Sprintf("purging: %s in %s (%s)", count(r.Purged, "payload", "payloads"), count(r.Batches, "batch", "batches"), fmtAge(r.Elapsed)))
			}
		}
		res, err := view.Purge(ctx, p)
		line.done()
		if err != nil {
			return err
		}
		out.Purged, out.Batches = res.Purged, res.Batches
	}
	out.ElapsedSeconds = time.Since(start).Seconds()
	if *asJSON {
		return writeJSON(e.stdout, out)
	}
	fmt.Fprintln(e.stdout, out.text())
	return nil
}
