package main

import (
	"context"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestPurgeOutput: a run and a dry run report the same fields, as text and as
// JSON, including the cutoff they use; counts read "1 payload", "1 batch".
func TestPurgeOutput(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t)
	db := map[string]string{"DATABASE_URL": f.dsn}
	const age = 30 * 24 * time.Hour

	// cutoffWithin checks a printed cutoff against the clock around the run:
	// now minus 30 days, to the second.
	cutoffWithin := func(cutoff, before, after time.Time) {
		t.Helper()
		lo, hi := before.Add(-age).Truncate(time.Second), after.Add(-age)
		if cutoff.Before(lo) || cutoff.After(hi) {
			t.Errorf("cutoff %s, want between %s and %s", cutoff, lo, hi)
		}
	}
	purgeJSON := func(args ...string) (map[string]any, jsonPurge) {
		t.Helper()
		before := time.Now()
		code, stdout, stderr := runIn(t, db, append([]string{"purge", "--older-than", "30d", "--json"}, args...)...)
		after := time.Now()
		if code != exitOK {
			t.Fatalf("purge --json %v: exit %d: %s", args, code, stderr)
		}
		var raw map[string]any
		var out jsonPurge
		is.NoErr(json.Unmarshal([]byte(stdout), &raw))
		is.NoErr(json.Unmarshal([]byte(stdout), &out))
		cutoffWithin(out.Cutoff, before, after)
		return raw, out
	}
	textLine := regexp.MustCompile(`^(dry run: would purge|purged) (\d+ payloads?) in (\d+ batch(?:es)?) of at most (\d+) \([^)]+\); cutoff: completed before (\S+ \S+)(; nothing changed)?\n$`)
	purgeText := func(args ...string) []string {
		t.Helper()
		before := time.Now()
		code, stdout, stderr := runIn(t, db, append([]string{"purge", "--older-than", "30d"}, args...)...)
		after := time.Now()
		if code != exitOK {
			t.Fatalf("purge %v: exit %d: %s", args, code, stderr)
		}
		m := textLine.FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("purge %v printed %q", args, stdout)
		}
		cutoff, err := time.Parse("2006-01-02 15:04:05Z", m[5])
		is.NoErr(err)
		cutoffWithin(cutoff, before, after)
		return m[1:5]
	}

	// Dry runs: one COMPLETED receipt 40 days old is due for purge.
	dryRaw, dry := purgeJSON("--dry-run")
	is.Equal(dry.DryRun, true)
	is.Equal(dry.Purged, int64(1))
	is.Equal(dry.Batches, 1)
	is.Equal(dry.BatchSize, 1000)
	is.Equal(purgeText("--dry-run"), []string{"dry run: would purge", "1 payload", "1 batch", "1000"})
	is.True(payloadKept(t, f)) // a dry run changes nothing

	// The run does what the dry run said, in the same shape.
	runRaw, run := purgeJSON("--batch-size", "10")
	is.Equal(slices.Sorted(maps.Keys(runRaw)), slices.Sorted(maps.Keys(dryRaw)))
	is.Equal(slices.Sorted(maps.Keys(runRaw)), []string{"batch_size", "batches", "cutoff", "dry_run", "elapsed_seconds", "purged"})
	is.Equal(run.DryRun, false)
	is.Equal(run.Purged, int64(1))
	is.Equal(run.Batches, 1)
	is.Equal(run.BatchSize, 10)
	is.True(!payloadKept(t, f))

	// Nothing left: plurals of zero.
	is.Equal(purgeText(), []string{"purged", "0 payloads", "0 batches", "1000"})
}

// TestPurgeAgeOverflow: an age that would wrap time.Duration around (213504d
// is 25 minutes after the wrap) is refused; nothing is purged.
func TestPurgeAgeOverflow(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t)
	// Completed 30 minutes ago: the wrapped age would have purged it.
	_, err := f.pool.Exec(context.Background(), "UPDATE pginbox_receipts SET completed_at = now() - interval '30 minutes' WHERE id = $1", f.completed)
	is.NoErr(err)
	db := map[string]string{"DATABASE_URL": f.dsn}
	for _, age := range []string{"213504d", "5124095h", "36501d"} {
		code, _, stderr := runIn(t, db, "purge", "--older-than", age)
		is.Equal(code, exitUsage)
		is.True(len(stderr) > 0)
		is.True(payloadKept(t, f))
	}
	// The longest accepted age purges only what is that old: nothing here.
	code, stdout, _ := runIn(t, db, "purge", "--older-than", "36500d")
	is.Equal(code, exitOK)
	is.True(regexp.MustCompile(`^purged 0 payloads in 0 batches .*; cutoff: completed before 19\d\d-`).MatchString(stdout))
	is.True(payloadKept(t, f))
}

// payloadKept reports whether the fixture's COMPLETED receipt still has its payload.
func payloadKept(t *testing.T, f *fixture) bool {
	t.Helper()
	var kept bool
	if err := f.pool.QueryRow(context.Background(),
		"SELECT payload_purged_at IS NULL FROM pginbox_receipts_live WHERE id = $1", f.completed).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	return kept
}
