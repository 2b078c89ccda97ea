package drills

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/testkit"
)

// TestDrillTablespaceFull puts pginbox's tables (receipts and work queue)
// and their indexes in a tablespace on a small tmpfs, and accepts until it is
// full; the WAL, the catalogs and the business table stay on the cluster's
// own disk (TestDrillWALVolumeFull fills the WAL's). The accepts that cannot
// be stored fail with a retryable error (never Accepted), the worker
// completes what it can or fails cleanly, and once space is freed everything
// resumes by itself. amcheck then finds the tables and their indexes intact.
func TestDrillTablespaceFull(t *testing.T) {
	requireFull(t)
	const count, rate = 8000, 400.0
	mnt := smallDisk(t, 24<<20)
	c := startCluster(t, nil)
	admin, dsn := prepare(t, c)
	ts := filepath.Join(mnt, "ts")
	mustMkdirOwned(t, ts)
	for _, sql := range []string{
		"CREATE EXTENSION amcheck",
		"CREATE TABLESPACE drill_small LOCATION '" + ts + "'",
		"ALTER TABLE pginbox_receipts SET TABLESPACE drill_small",
		"ALTER TABLE pginbox_work SET TABLESPACE drill_small",
	} {
		exec1(t, admin, sql)
	}
	for _, idx := range receiptIndexes(t, admin) {
		exec1(t, admin, "ALTER INDEX "+idx+" SET TABLESPACE drill_small")
	}
	// Ballast leaves about 1.5 MB free: a few thousand receipts.
	ballast := filepath.Join(mnt, "ballast")
	fill(t, mnt, ballast, 3<<19)

	a := startApp(t, dsn, appConfig{})
	load := a.load(t, count, rate)
	testkit.Eventually(t, 2*time.Minute, func() bool {
		return load.Snapshot().Codes["53100"] > 0
	}, "the tablespace to fill (an accept failing with SQLSTATE 53100)")
	// The fault is the one meant: the server ran out of space on the
	// tablespace's file system (ENOSPC), in the receipts' files.
	if n := logCount(t, c, "No space left on device", "pg_tblspc/"); n == 0 {
		t.Errorf("the server log has no ENOSPC error (No space left on device) on a tablespace file (pg_tblspc/): the tablespace did not fill")
	}
	full := time.Now()
	ackedWhenFull := len(load.Snapshot().Acked)
	time.Sleep(3 * time.Second) // the fault's window: accepts and the worker meet the full disk
	during := load.Snapshot()
	if len(during.Acked) != ackedWhenFull {
		t.Logf("%d accepts acknowledged while the disk was full (space freed by the worker's updates or vacuum)", len(during.Acked)-ackedWhenFull)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	recovery := firstAckAfter(t, load, freed).Sub(freed)
	warnings := a.logs.total()

	tally := finish(t, "tablespace-full", admin, load, recovery,
		fmt.Sprintf("full_for=%s disk_full_errors=%d enospc_log_lines=%d worker_warnings=%d",
			freed.Sub(full).Round(time.Millisecond), during.Codes["53100"], logCount(t, c, "No space left on device"), warnings))
	if tally.Missing != 0 {
		t.Errorf("an accept was acknowledged for a receipt that is not stored")
	}
	for _, l := range a.logs.firstLines() {
		t.Logf("worker: %s", l)
	}
	// Nothing is corrupted: the heap and every index check out.
	var bad int
	for _, table := range []string{"pginbox_receipts", "pginbox_work"} {
		if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM verify_heapam($1)", table).Scan(&bad); err != nil || bad != 0 {
			t.Errorf("verify_heapam(%s): %d problems (%v)", table, bad, err)
		}
	}
	for _, idx := range receiptIndexes(t, admin) {
		if _, err := admin.Exec(t.Context(), "SELECT bt_index_check($1::regclass, true)", idx); err != nil {
			t.Errorf("index %s: %v", idx, err)
		}
	}
}

// receiptIndexes names the receipts table's indexes.
func receiptIndexes(t *testing.T, db *pgxpool.Pool) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid IN ('pginbox_receipts'::regclass, 'pginbox_work'::regclass) ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}
