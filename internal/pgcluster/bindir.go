package pgcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// FindBinDir returns the directory containing the PostgreSQL server
// binaries (initdb, pg_ctl, postgres). It looks, in order: initdb on PATH
// (symlinks resolved), `pg_config --bindir`, and the newest
// /usr/lib/postgresql/<version>/bin (Debian/Ubuntu layout, not on PATH by
// default).
func FindBinDir() (string, error) {
	var tried []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if dir := filepath.Dir(p); hasServerBinaries(dir) {
			return dir, nil
		}
		tried = append(tried, "PATH ("+p+")")
	} else {
		tried = append(tried, "PATH")
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); hasServerBinaries(dir) {
			return dir, nil
		}
		tried = append(tried, "pg_config --bindir ("+strings.TrimSpace(string(out))+")")
	} else {
		tried = append(tried, "pg_config --bindir")
	}
	pattern := debianBinDirs
	dirs, _ := filepath.Glob(pattern)
	// Newest major version first ("9.6" < "10" < "15"), compared numerically.
	slices.SortFunc(dirs, func(a, b string) int {
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	for _, dir := range dirs {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	tried = append(tried, pattern)
	return "", fmt.Errorf("pgcluster: PostgreSQL server binaries (initdb, pg_ctl, postgres) not found; looked in %s. "+
		"Install the server: `apt-get install postgresql` (Debian/Ubuntu), `dnf install postgresql-server` (Fedora), "+
		"`brew install postgresql` (macOS), or put its bin directory on PATH",
		strings.Join(tried, ", "))
}

// debianBinDirs is where Debian and Ubuntu install the server binaries, one
// directory per major version. A variable so tests can point it elsewhere.
var debianBinDirs = "/usr/lib/postgresql/*/bin"

func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// compareVersions compares dotted numeric versions like "9.6" and "15".
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return strings.Compare(a, b)
}
