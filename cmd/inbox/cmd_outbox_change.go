package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/pginbox/pginbox/outbox"
)

var outboxRequeueCmd = &command{
	Name:    "outbox requeue",
	Args:    "ID --version N [--json]",
	Summary: "send a DEAD event back to PENDING with a fresh retry budget",
	Help: `
The event must still be at --version (as ` + "`inbox outbox show`" + ` printed it);
otherwise nothing changes and the exit code is 4. Listening relays wake up at
once. The event keeps its ID, so receivers that got it before its failure
deduplicate it; among the events of its ordering key it goes out after those
published while it was DEAD.`,
}

var outboxPurgeCmd = &command{
	Name:    "outbox purge",
	Args:    "--older-than AGE [--batch-size N] [--dry-run] [--json]",
	Summary: "delete PUBLISHED events past retention, in batches",
	Help: `
Relays delete PUBLISHED events after their retention (RelayConfig.Retention,
default 24h) themselves; purge deletes those published more than AGE ago
(720h, 30d, ...; at most 36500d) now, BATCH-SIZE per short transaction.
Unpublished and DEAD events are never deleted. Receivers deduplicate on their
side, so this is history only. --dry-run counts and changes nothing.

With --json:
  {
    "dry_run": false,
    "cutoff": "2024-05-01T12:00:00Z",   events published before it are deleted
    "deleted": 1234                      (a dry run: would be)
  }`,
}

func init() {
	outboxRequeueCmd.Run = runOutboxRequeue
	outboxPurgeCmd.Run = runOutboxPurge
	outboxGroup.add(outboxRequeueCmd)
	outboxGroup.add(outboxPurgeCmd)
}

type jsonOutboxRequeue struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	FromVersion int64  `json:"from_version"`
	Version     int64  `json:"version"`
}

func runOutboxRequeue(ctx context.Context, e *env, args []string) error {
	fs := newFlags(outboxRequeueCmd)
	var d dbFlags
	d.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	version := numberVar(fs, "version", 0, 1, math.MaxInt64, "the event's current version `N`, as `inbox outbox show` prints it (required)")
	version.noun = "an event version"
	pos, err := parseFlags(e, outboxRequeueCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one event ID")
	}
	id, err := parseIDArg(pos[0])
	if err != nil {
		return err
	}
	if !version.set {
		return usagef("--version is required: the version `inbox outbox show` prints, so an event that changed meanwhile is not touched")
	}
	admin, closeDB, err := outboxAdmin(ctx, e, &d)
	if err != nil {
		return err
	}
	defer closeDB()
	res, err := admin.Requeue(ctx, id, version.n)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, jsonOutboxRequeue{ID: res.ID.String(), Status: "PENDING", FromVersion: res.FromVersion, Version: res.Version})
	}
	fmt.Fprintf(e.stdout, "requeued %s: DEAD -> PENDING, version %d -> %d\n", res.ID, res.FromVersion, res.Version)
	return nil
}

type jsonOutboxPurge struct {
	DryRun  bool      `json:"dry_run"`
	Cutoff  time.Time `json:"cutoff"`
	Deleted int64     `json:"deleted"`
}

func runOutboxPurge(ctx context.Context, e *env, args []string) error {
	fs := newFlags(outboxPurgeCmd)
	var d dbFlags
	d.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	olderThan := &durationFlag{min: 1, max: maxAge, want: wantRetention}
	fs.Var(olderThan, "older-than", "delete events published more than `AGE` ago, e.g. 720h or 30d, at most 36500d (required)")
	batch := numberVar(fs, "batch-size", outbox.DefaultPurgeBatchSize, 1, outbox.MaxPurgeBatchSize,
		fmt.Sprintf("`N` events per batch, 1 to %d", outbox.MaxPurgeBatchSize))
	dryRun := fs.Bool("dry-run", false, "only count what would be deleted")
	pos, err := parseFlags(e, outboxPurgeCmd, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if !olderThan.set {
		return usagef("--older-than is required: the retention period, e.g. --older-than 720h")
	}
	admin, closeDB, err := outboxAdmin(ctx, e, &d)
	if err != nil {
		return err
	}
	defer closeDB()
	p := outbox.PurgeParams{OlderThan: olderThan.d, BatchSize: int(batch.n)}
	out := jsonOutboxPurge{DryRun: *dryRun}
	if *dryRun {
		out.Deleted, out.Cutoff, err = admin.PurgeCount(ctx, p)
	} else {
		var res outbox.PurgeResult
		res, err = admin.Purge(ctx, p)
		out.Deleted, out.Cutoff = res.Deleted, res.Cutoff
	}
	if err != nil {
		return err
	}
	out.Cutoff = out.Cutoff.UTC()
	if *asJSON {
		return writeJSON(e.stdout, out)
	}
	if *dryRun {
		fmt.Fprintf(e.stdout, "dry run: would delete %s published before %s; nothing changed\n", count(out.Deleted, "event", "events"), fmtTime(out.Cutoff))
		return nil
	}
	fmt.Fprintf(e.stdout, "deleted %s published before %s\n", count(out.Deleted, "event", "events"), fmtTime(out.Cutoff))
	return nil
}
