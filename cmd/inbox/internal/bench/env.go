package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Environment is what the figures depend on.
type Environment struct {
	PostgresVersion   string `json:"postgres_version"`   // server_version
	Fsync             string `json:"fsync"`              // the server settings that decide what a commit costs
	SynchronousCommit string `json:"synchronous_commit"` // on: a commit waits for the WAL flush
	FullPageWrites    string `json:"full_page_writes"`   // full_page_writes
	WalSyncMethod     string `json:"wal_sync_method"`    // wal_sync_method
	SharedBuffers     string `json:"shared_buffers"`     // shared_buffers
	Cores             int    `json:"cores"`              // runtime.NumCPU of the benchmark process
	CPU               string `json:"cpu"`                // the CPU model, from /proc/cpuinfo
	GoVersion         string `json:"go_version"`         // the toolchain that built the benchmark
	OS                string `json:"os"`                 // GOOS/GOARCH
	PginboxCommit     string `json:"pginbox_commit"`     // the source measured, -dirty with local changes
	Database          string `json:"database"`           // the target: the ephemeral cluster or DATABASE_URL
	StartedAt         string `json:"started_at"`         // RFC 3339, UTC
}

func environment(ctx context.Context, pool *pgxpool.Pool, target string) (Environment, error) {
	e := Environment{
		Cores:         runtime.NumCPU(),
		CPU:           cpuModel(),
		GoVersion:     runtime.Version(),
		OS:            runtime.GOOS + "/" + runtime.GOARCH,
		PginboxCommit: commit(ctx),
		Database:      target,
		StartedAt:     time.Now().UTC().Format(time.RFC3339),
	}
	err := pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes'),
		current_setting('wal_sync_method'), current_setting('shared_buffers')`).
		Scan(&e.PostgresVersion, &e.Fsync, &e.SynchronousCommit, &e.FullPageWrites, &e.WalSyncMethod, &e.SharedBuffers)
	if err != nil {
		return e, fmt.Errorf("bench: reading server settings: %w", err)
	}
	return e, nil
}

// commit names the pginbox source measured: the VCS stamp of a built binary,
// else `git describe` of the working tree (`go run` does not stamp), marked
// -dirty when it has uncommitted changes.
func commit(ctx context.Context) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			if len(rev) > 7 {
				rev = rev[:7]
			}
			if modified == "true" {
				rev += "-dirty"
			}
			return rev
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty", "--abbrev=7").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func createDatabase(ctx context.Context, adminDSN, name string) error {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("bench: creating database %s: %w", name, err)
	}
	return nil
}

// createExtension creates a server extension in the database of cfg.
func createExtension(ctx context.Context, cfg *pgxpool.Config, name string) error {
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("bench: creating extension %s: %w", name, err)
	}
	return nil
}

// loadAverage is the machine's 1-minute load average, for the record beside
// a figure taken on a shared machine.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	l, _ := strconv.ParseFloat(f, 64)
	return l
}
