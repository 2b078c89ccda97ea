package drills

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/testkit"
)

// TestDrillWALVolumeFull puts the cluster's write-ahead log (pg_wal, 1 MB
// segments) on a small tmpfs and accepts until it is full. PostgreSQL cannot
// write WAL without space: the backend that needs a new segment PANICs, the
// postmaster ends every session, and its crash recovery either brings the
// server back (and the next segment PANICs it again) or fails and the
// postmaster exits. The drill records what the server did and what the
// accepts saw, then frees the space, starts the server if it is down, and
// checks that nothing acknowledged was lost or applied twice. This cluster
// runs durable (fsync, synchronous_commit and full_page_writes on): the
// fault is in the WAL write path itself.
func TestDrillWALVolumeFull(t *testing.T) {
	requireFull(t)
	const count, rate = 4000, 200.0
	mnt := smallDisk(t, 64<<20)
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{
		Fsync:        true,
		WALDir:       filepath.Join(mnt, "wal"),
		WALSegmentMB: 1,
		Settings:     drillSettings(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	admin, dsn := prepare(t, c)
	a := startApp(t, dsn, appConfig{})
	testkit.Eventually(t, 10*time.Second, func() bool { return listening(t, admin) }, "the worker to LISTEN")
	// Ballast leaves 4 MB for WAL: four segments, a few seconds of load.
	ballast := filepath.Join(mnt, "ballast")
	fill(t, mnt, ballast, 4<<20)

	load := a.load(t, count, rate)
	testkit.Eventually(t, 2*time.Minute, func() bool {
		return logCount(t, c, "No space left on device") > 0
	}, "the WAL volume to fill (ENOSPC in the server log)")
	full := time.Now()
	ackedWhenFull := len(load.Snapshot().Acked)
	logFrom := len(logLines(t, c))
	// What the server does with a full WAL volume, and what accepts see,
	// over ten seconds: the fault's window, not a wait for an event.
	time.Sleep(10 * time.Second)
	during := load.Snapshot()
	exited := !c.Running()
	panics := logCount(t, c, "PANIC:")
	readyAgain := logCount(t, c, "database system is ready to accept connections") - 1 // the first start
	// The server's own account of those seconds, for the report.
	serverSaid := 0
	for _, line := range logLines(t, c)[max(0, logFrom-5):] {
		noise := strings.Contains(line, "cancel request") || strings.Contains(line, "accepting connections") || strings.Contains(line, "recovery mode")
		if !noise && (strings.Contains(line, "PANIC") || strings.Contains(line, "LOG:") || strings.Contains(line, "FATAL")) {
			if serverSaid++; serverSaid <= 25 {
				t.Logf("server while full: %s", line)
			}
		}
	}
	walErrors := logCount(t, c, "No space left on device", "pg_wal/")
	if walErrors == 0 {
		t.Errorf("no ENOSPC error names a WAL file (pg_wal/): something else filled up")
	}
	if during.Uncertain+during.Retryable == 0 {
		t.Errorf("no accept failed while the WAL volume was full: the drill proved nothing")
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	// A postmaster that gave up stays down until someone starts it: that
	// is the operator's step after freeing space.
	startedAgain := 0
	testkit.Eventually(t, 2*time.Minute, func() bool {
		if !c.Running() {
			if err := c.StartAgain(t.Context()); err != nil {
				t.Logf("starting the server again: %v", err)
				return false
			}
			startedAgain++
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		return admin.Ping(ctx) == nil
	}, "the server to accept connections again")
	recovery := firstAckAfter(t, load, freed).Sub(freed)
	for class, text := range during.Errors {
		t.Logf("while full, first %s accept error: %s", class, text)
	}
	finish(t, "wal-volume-full", admin, load, recovery, fmt.Sprintf(
		"full_for=%s acked_while_full=%d panics=%d ready_again_while_full=%d wal_enospc_log_lines=%d server_exited=%t started_again=%d codes_while_full=%v worker_warnings=%d",
		freed.Sub(full).Round(time.Millisecond), len(during.Acked)-ackedWhenFull, panics, readyAgain, walErrors, exited, startedAgain,
		during.Codes, a.logs.total()))
	// Nothing acknowledged is lost (finish), and the receipts' table is
	// intact after the crash recovery.
	exec1(t, admin, "CREATE EXTENSION IF NOT EXISTS amcheck")
	var bad int
	for _, table := range []string{"pginbox_receipts", "pginbox_work"} {
		if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM verify_heapam($1)", table).Scan(&bad); err != nil || bad != 0 {
			t.Errorf("verify_heapam(%s): %d problems (%v)", table, bad, err)
		}
	}
}
