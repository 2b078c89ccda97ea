package drills

import (
	"syscall"
	"testing"
)

// available is the free space on dir's file system, in bytes.
func available(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}
