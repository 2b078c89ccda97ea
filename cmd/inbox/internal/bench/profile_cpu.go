package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux).
const clockTicks = 100

// cpuSnapshot is the CPU time used so far by this process, by each server
// backend and by the whole machine.
type cpuSnapshot struct {
	at       time.Time
	self     time.Duration
	backends map[int32]backendCPU // by pid
	busy     time.Duration        // machine: every CPU's non-idle time
	total    time.Duration        // machine: every CPU's time
}

type backendCPU struct {
	group string // application name, else the backend type
	used  time.Duration
}

// cpuAccount is what a phase used, in CPU seconds.
type cpuAccount struct {
	wall     time.Duration
	self     time.Duration
	groups   map[string]time.Duration
	machine  time.Duration // busy time of every CPU
	capacity time.Duration // wall x CPUs
	err      error
}

// startCPUAccount snapshots CPU times now; the returned function snapshots
// them again and returns the difference. Backends are read from /proc, so
// their figures need the server on this machine (the ephemeral cluster);
// elsewhere the account holds this process and the machine only.
func (s *suite) startCPUAccount(ctx context.Context) (stop func() cpuAccount) {
	before, err := s.cpuSnapshot(ctx)
	return func() cpuAccount {
		after, err2 := s.cpuSnapshot(ctx)
		a := cpuAccount{
			wall: after.at.Sub(before.at), self: after.self - before.self,
			machine: after.busy - before.busy, capacity: after.total - before.total,
			groups: map[string]time.Duration{}, err: cmpErr(err, err2),
		}
		for pid, b := range after.backends {
			used := b.used
			if o, ok := before.backends[pid]; ok {
				used -= o.used
			}
			a.groups[b.group] += used // a backend that started meanwhile counts whole
		}
		return a
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (s *suite) cpuSnapshot(ctx context.Context) (cpuSnapshot, error) {
	snap := cpuSnapshot{at: time.Now(), backends: map[int32]backendCPU{}}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		snap.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	snap.busy, snap.total = machineCPU()
	rows, err := s.admin.Query(ctx, `SELECT pid, CASE WHEN application_name <> '' THEN application_name ELSE backend_type END
		FROM pg_stat_activity`)
	if err != nil {
		return snap, err
	}
	defer rows.Close()
	for rows.Next() {
		var pid int32
		var group string
		if err := rows.Scan(&pid, &group); err != nil {
			return snap, err
		}
		if used, ok := processCPU(pid); ok {
			snap.backends[pid] = backendCPU{group: group, used: used}
		}
	}
	return snap, rows.Err()
}

// processCPU reads a process's user + system time from /proc/PID/stat.
func processCPU(pid int32) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name is in parentheses and may hold spaces: fields start after ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14 of the file
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, true
}

// machineCPU reads the machine's busy and total CPU time from /proc/stat.
func machineCPU() (busy, total time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	var sum, idle int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest times are already in user
			break
		}
		sum += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return time.Duration(sum-idle) * time.Second / clockTicks, time.Duration(sum) * time.Second / clockTicks
}

// writeCPUAccount writes where the CPU went during the phase.
func writeCPUAccount(path string, a cpuAccount, messages int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "CPU time over the profiled window (%.1fs wall, %d messages completed)", a.wall.Seconds(), messages)
	if a.err != nil {
		fmt.Fprintf(f, " (backends unreadable: %v)", a.err)
	}
	fmt.Fprintln(f)
	tw := tabwriter.NewWriter(f, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tCPU s\tCPUs busy\tus/msg\t")
	row := func(name string, d time.Duration) {
		perMsg := "-"
		if messages > 0 {
			perMsg = fmt.Sprintf("%.0f", float64(d.Microseconds())/float64(messages))
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%s\t\n", name, d.Seconds(), d.Seconds()/max(a.wall.Seconds(), 1e-9), perMsg)
	}
	row("machine, every process", a.machine)
	row("this bench process (Go)", a.self)
	var ours time.Duration
	for _, g := range []string{appIngest, appDrain} {
		row("backends "+g, a.groups[g])
		ours += a.groups[g]
	}
	var others time.Duration
	for g, d := range a.groups {
		if g != appIngest && g != appDrain {
			row("backends "+g, d)
			others += d
		}
	}
	row("everything else on the machine", a.machine-a.self-ours-others)
	fmt.Fprintf(tw, "machine capacity\t%.2f\t%.2f\t\t\n", a.capacity.Seconds(), a.capacity.Seconds()/max(a.wall.Seconds(), 1e-9))
	return tw.Flush()
}
