package pgcluster

import (
	"os"
	"path/filepath"
)

// defaultBaseDir picks where cluster directories go: see Options.BaseDir.
func defaultBaseDir(otherUser, fsync bool) string {
	if !fsync {
		if dir := memoryBaseDir(); dir != "" {
			return dir
		}
	}
	base := os.TempDir()
	// "/pgcluster-" + up to 10 random digits + "/.s.PGSQL.NNNNN.lock"
	if len(base)+len("/"+dirPrefix+"0123456789/.s.PGSQL.65535.lock") > maxSocketPath {
		return "/tmp"
	}
	if otherUser && !traversableByOthers(base) {
		return "/tmp"
	}
	return base
}

func traversableByOthers(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}
