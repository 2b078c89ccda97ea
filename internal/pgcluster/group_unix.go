//go:build unix

package pgcluster

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// The postmaster's children (backends, background processes) each lead a
// session of their own (PostgreSQL calls setsid in every child), so they
// are found by their parent, before the postmaster dies and they are
// reparented.

// procStat is what /proc/<pid>/stat says of a process.
type procStat struct {
	pid, ppid int
	zombie    bool
}

// processes lists the processes in /proc; nil without /proc.
func processes() []procStat {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []procStat
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		head, f := bytes.Fields(b[:i]), bytes.Fields(b[i+1:])
		if len(head) < 1 || len(f) < 2 {
			continue
		}
		pid, err1 := strconv.Atoi(string(head[0]))
		ppid, err2 := strconv.Atoi(string(f[1]))
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, procStat{pid: pid, ppid: ppid, zombie: string(f[0]) == "Z" || string(f[0]) == "X"})
	}
	return out
}

// childrenOf returns the PIDs of pid's live children.
func childrenOf(pid int) []int {
	var out []int
	for _, p := range processes() {
		if p.ppid == pid && !p.zombie {
			out = append(out, p.pid)
		}
	}
	return out
}

// waitGone waits up to d until none of pids is alive (a zombie is not:
// the PID 1 of a container may never reap the orphans), and reports
// whether none is.
func waitGone(pids []int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		alive := map[int]bool{}
		for _, p := range processes() {
			if !p.zombie {
				alive[p.pid] = true
			}
		}
		left := false
		for _, pid := range pids {
			left = left || alive[pid]
		}
		if !left {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killPids sends SIGKILL to pids.
func killPids(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
