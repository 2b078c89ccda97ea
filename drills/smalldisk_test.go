package drills

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/internal/pgcluster"
)

// smallDisk mounts a tmpfs of size bytes, owned by the server's OS user, and
// unmounts it at test end (after the cluster stopped: register it first).
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the disk-full drills mount a tmpfs and need root, as CI runs")
		}
		t.Skip("the disk-full drills mount a tmpfs: run `make drills` as root")
	}
	dir, err := os.MkdirTemp("", "pginbox-diskfull-")
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := serverUser(t)
	out, err := exec.Command("mount", "-t", "tmpfs", "-o",
		fmt.Sprintf("size=%d,mode=0700,uid=%d,gid=%d", size, uid, gid), "pginbox-drill", dir).CombinedOutput()
	if err != nil {
		os.Remove(dir)
		// A container without the mount capability: skipped outside CI,
		// where the drills run as root on a machine that can mount.
		if os.Getenv("CI") == "true" {
			t.Fatalf("mounting a tmpfs on %s: %v: %s", dir, err, out)
		}
		t.Skipf("skipping: this drill mounts a tmpfs and mounting failed (%v: %s); run `make drills` as root where mount works", err, strings.TrimSpace(string(out)))
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

// logCount is how many lines of c's server log contain every one of s.
func logCount(t *testing.T, c *pgcluster.Cluster, s ...string) int {
	t.Helper()
	n := 0
	for _, line := range logLines(t, c) {
		if !slices.ContainsFunc(s, func(sub string) bool { return !strings.Contains(line, sub) }) {
			n++
		}
	}
	return n
}

// logLines is c's server log.
func logLines(t *testing.T, c *pgcluster.Cluster) []string {
	t.Helper()
	b, err := os.ReadFile(c.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}
