package drills

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestDrillDiskFull puts pginbox's receipts table and its indexes in a
// tablespace on a small tmpfs, and accepts until it is full: the accepts
// that cannot be stored fail with a retryable error (never Accepted), the
// worker completes what it can or fails cleanly, and once space is freed
// everything resumes by itself. amcheck then finds the table and its indexes
// intact.
func TestDrillDiskFull(t *testing.T) {
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
	eventually(t, 2*time.Minute, "the disk to fill (an accept failing with SQLSTATE 53100)", func() bool {
		return load.Snapshot().Codes["53100"] > 0
	})
	full := time.Now()
	ackedWhenFull := len(load.Snapshot().Acked)
	time.Sleep(3 * time.Second) // accepts and the worker meet the full disk
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

	tally := finish(t, "disk-full", admin, load, recovery,
		fmt.Sprintf("full_for=%s disk_full_errors=%d worker_warnings=%d", freed.Sub(full).Round(time.Millisecond), during.Codes["53100"], warnings))
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

// smallDisk mounts a tmpfs of size bytes, owned by the server's OS user, and
// unmounts it at test end (after the cluster stopped: register it first).
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the disk-full drill mounts a tmpfs and needs root, as CI runs")
		}
		t.Skip("the disk-full drill mounts a tmpfs: run `make drills` as root")
	}
	dir, err := os.MkdirTemp("", "pginbox-diskfull-")
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := serverUser(t)
	out, err := exec.Command("mount", "-t", "tmpfs", "-o",
		fmt.Sprintf("size=%d,mode=0700,uid=%d,gid=%d", size, uid, gid), "pginbox-drill", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("mounting a tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", dir, err, out)
		}
		os.Remove(dir)
	})
	return dir
}

// serverUser is the uid and gid the drill clusters run as (pgcluster's
// default OS user when root).
func serverUser(t *testing.T) (int, int) {
	t.Helper()
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid
}

func mustMkdirOwned(t *testing.T, dir string) {
	t.Helper()
	uid, gid := serverUser(t)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// fill writes a ballast file that leaves about free bytes on the file system
// of dir.
func fill(t *testing.T, dir, ballast string, free int64) {
	t.Helper()
	avail := available(t, dir)
	if avail <= free {
		t.Fatalf("only %d bytes free on %s", avail, dir)
	}
	f, err := os.Create(ballast)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for left := avail - free; left > 0; left -= int64(len(chunk)) {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), left)]); err != nil {
			t.Fatal(err)
		}
	}
}

func exec1(t *testing.T, db *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
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
