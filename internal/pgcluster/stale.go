package pgcluster

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sweepStale removes cluster directories under base whose owning process
// and server are both gone: the leftovers of processes that died without
// calling Stop. The server itself is normally already dead thanks to the
// parent-death signal. Directories whose server still runs are left alone.
func sweepStale(base string, logger *slog.Logger) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
			continue
		}
		dir := filepath.Join(base, e.Name())
		owner, host, ok := readOwner(filepath.Join(dir, ownerFile))
		if !ok || host != hostname() || processAlive(owner) {
			// Not ours, still being set up, made on another host (a
			// container sharing the directory: its pids mean nothing
			// here), or still in use.
			continue
		}
		pmFile := filepath.Join(dir, "data", "postmaster.pid")
		if pm, ok := readPid(pmFile); ok {
			if processAlive(pm) {
				continue // an orphaned server still runs; don't pull its files away
			}
		} else if _, err := os.Stat(pmFile); !errors.Is(err, os.ErrNotExist) {
			continue // present but unreadable: can't tell, leave it
		}
		if err := os.RemoveAll(dir); err == nil {
			logger.Info("pgcluster: removed stale cluster directory", "dir", dir, "owner_pid", owner)
		}
	}
}

// readOwner reads the owner file: pid and hostname lines.
func readOwner(path string) (pid int, host string, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, "", false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 {
		return 0, "", false
	}
	pid, err = strconv.Atoi(lines[0])
	return pid, lines[1], err == nil && pid > 0
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// readPid reads the number on the first line of a pid file.
func readPid(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil && pid > 0
}
