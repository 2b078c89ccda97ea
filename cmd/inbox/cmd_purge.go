package main

import (
	"context"
	"fmt"
	"time"

	"github.com/pginbox/pginbox/inbox"
)

var purgeCmd = &command{
	Name:    "purge",
	Args:    "--older-than AGE [--batch-size N] [--pause D] [--dry-run]",
	Summary: "drop payloads of COMPLETED receipts past retention, in batches",
	Help: `
Purge drops the payload of every COMPLETED receipt completed more than AGE ago
(720h, 30d, ...), BATCH-SIZE receipts per short transaction. Identity,
fingerprint, metadata and lineage stay, so a redelivery of a purged message is
still a duplicate and a changed one still a conflict; purged receipts cannot be
replayed. Safe to run while workers run, from cron, and to interrupt: finished
batches stay committed and the next run carries on.`,
}

func init() {
	purgeCmd.Run = runPurge
	register(purgeCmd)
}

type jsonPurge struct {
	Cutoff         time.Time `json:"cutoff"`
	DryRun         bool      `json:"dry_run"`
	Purged         int64     `json:"purged"`
	Batches        int       `json:"batches"`
	ElapsedSeconds float64   `json:"elapsed_seconds"`
}

func runPurge(ctx context.Context, e *env, args []string) error {
	fs := newFlags(purgeCmd)
	var d dbFlags
	var s scopeFlags
	d.add(fs)
	s.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	olderThan := fs.String("older-than", "", "retention: purge receipts completed more than `AGE` ago, e.g. 720h or 30d (required)")
	batch := fs.Int("batch-size", inbox.DefaultPurgeBatchSize, fmt.Sprintf("receipts per batch, at most %d", inbox.MaxPurgeBatchSize))
	pause := fs.Duration("pause", 0, "rest between batches, to spare replicas and autovacuum")
	dryRun := fs.Bool("dry-run", false, "only count what would be purged")
	pos, err := parseFlags(e, purgeCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if *olderThan == "" {
		return usagef("--older-than is required: the retention period, e.g. --older-than 720h")
	}
	age, err := parseAge(*olderThan)
	if err != nil || age <= 0 {
		return usagef("--older-than %q: want a positive duration like 720h or 30d", *olderThan)
	}
	if *batch < 1 || *batch > inbox.MaxPurgeBatchSize {
		return usagef("--batch-size %d: want 1 to %d", *batch, inbox.MaxPurgeBatchSize)
	}
	view, closeDB, err := adminFor(ctx, e, &d, &s)
	if err != nil {
		return err
	}
	defer closeDB()
	p := inbox.PurgeParams{OlderThan: age, BatchSize: *batch, Pause: *pause}

	if *dryRun {
		n, cutoff, err := view.PurgeCount(ctx, p)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(e.stdout, jsonPurge{Cutoff: cutoff.UTC(), DryRun: true, Purged: n})
		}
		fmt.Fprintf(e.stdout, "dry run: %d receipts completed before %s would lose their payload (%d batches of %d)\n",
			n, fmtTime(cutoff), (n+int64(*batch)-1)/int64(*batch), *batch)
		return nil
	}

	line := newLiveLine(e)
	if !*asJSON {
		lastPrint := time.Time{}
		p.Progress = func(r inbox.PurgeResult) {
			// A line per second is enough in a log; a terminal redraws each batch.
			if !e.tty && time.Since(lastPrint) < time.Second {
				return
			}
			lastPrint = time.Now()
			line.set(fmt.Sprintf("purging: %d payloads in %d batches (%s)", r.Purged, r.Batches, fmtAge(r.Elapsed)))
		}
	}
	res, err := view.Purge(ctx, p)
	line.done()
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, jsonPurge{Cutoff: res.Cutoff.UTC(), Purged: res.Purged, Batches: res.Batches, ElapsedSeconds: res.Elapsed.Seconds()})
	}
	fmt.Fprintf(e.stdout, "purged %d payloads of receipts completed before %s in %d batches (%s)\n",
		res.Purged, fmtTime(res.Cutoff), res.Batches, fmtAge(res.Elapsed))
	return nil
}
