package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuTimes is the CPU time used so far by this process, by the server's
// backends of the phase's database (read from /proc: the server must run on
// this machine, as the ephemeral cluster does) and by the whole machine.
type cpuTimes struct {
	self, backends, machine time.Duration
}

func cpuNow(ctx context.Context, pool *pgxpool.Pool) (cpuTimes, error) {
	var c cpuTimes
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		c.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c.machine = machineBusy()
	rows, err := pool.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
	if err != nil {
		return c, err
	}
	defer rows.Close()
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			return c, err
		}
		c.backends += processCPU(pid)
	}
	return c, rows.Err()
}

// processCPU is a process's user + system time from /proc/PID/stat.
func processCPU(pid int32) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * time.Second / 100 // USER_HZ
}

// machineBusy is every CPU's non-idle time, from /proc/stat.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, v := range f[1:min(len(f), 9)] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * time.Second / 100
}
