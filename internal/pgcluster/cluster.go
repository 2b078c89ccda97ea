package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Options configures [Start]. The zero value is what tests want.
type Options struct {
	// Fsync turns on durable writes. Default false: fsync,
	// synchronous_commit and full_page_writes are all off, which is much
	// faster and fine for throwaway test data. Benchmarks should set it to
	// true so they measure honest commit costs. Then all three settings are
	// on, as in a default PostgreSQL install.
	Fsync bool

	// Logger receives lifecycle events (start, stop, timings). Default: none.
	// The server's own log goes to a file in the cluster directory
	// ([Cluster.LogPath]), and its tail is included in start errors.
	Logger *slog.Logger

	// Settings are extra server settings passed as `postgres -c name=value`.
	// They override the defaults (see [Start]).
	Settings map[string]string

	// BinDir is the directory holding initdb and postgres. Default:
	// [FindBinDir].
	BinDir string

	// OSUser is the OS user the server runs as when the caller runs as root
	// (PostgreSQL refuses to run as root). Default "postgres". Ignored
	// when not root.
	OSUser string

	// BaseDir is where the cluster's temporary directory is created.
	// Default: with Fsync off, /dev/shm when it is a tmpfs with at least
	// 1 GiB free. File creation dominates initdb and CREATE DATABASE, and
	// on ordinary disks they are many times slower. Otherwise
	// os.TempDir(), or /tmp when that is too long for a unix socket path or
	// (when running as root) not traversable by OSUser.
	BaseDir string

	// StartTimeout bounds initdb plus waiting for the server to accept
	// connections. Default 2 minutes.
	StartTimeout time.Duration
}

// Superuser is the database superuser of every cluster (trust auth, no
// password).
const Superuser = "postgres"

// MaxConnections is the default max_connections, high enough for
// concurrency tests.
const MaxConnections = 300

// Cluster is a running throwaway PostgreSQL server. Create it with [Start],
// and release it with [Cluster.Stop].
type Cluster struct {
	dir     string // temp dir; also the unix socket directory
	dataDir string
	logPath string
	port    int
	binDir  string
	log     *slog.Logger

	proc    *os.Process
	exited  chan struct{} // closed when the postmaster has exited
	waitErr error         // valid after exited is closed

	stopOnce sync.Once
	stopErr  error
}

// Start creates and starts a new cluster: initdb in a new temporary
// directory, then postgres with these settings (Options.Settings override
// them):
//
//	listen_addresses = ''            (unix socket only, no TCP)
//	unix_socket_directories = <dir>  (the private temp dir)
//	port = <random 20000-59999>      (only names the socket file)
//	max_connections = 300
//	fsync, synchronous_commit, full_page_writes = on/off per Options.Fsync
//
// Overriding listen_addresses, unix_socket_directories or port breaks
// ConnString.
//
// The superuser is "postgres" with trust authentication. Start returns once
// the server accepts connections. ctx and Options.StartTimeout bound only
// the start-up; the server runs until Stop. On failure, everything Start
// created is removed, and the error includes the tail of the server log.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if !supported {
		return nil, errors.New("pgtest: running PostgreSQL clusters is only supported on unix systems")
	}
	t0 := time.Now()
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	osUser := opts.OSUser
	if osUser == "" {
		osUser = "postgres"
	}
	cred, err := credentialFor(osUser)
	if err != nil {
		return nil, err
	}

	base := opts.BaseDir
	if base == "" {
		base = defaultBaseDir(cred != nil, opts.Fsync)
	}
	sweepStale(base, logger)

	dir, err := os.MkdirTemp(base, dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("pgtest: creating cluster directory: %w", err)
	}
	c := &Cluster{
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, "postgres.log"),
		port:    20000 + rand.IntN(40000),
		binDir:  binDir,
		log:     logger,
		exited:  make(chan struct{}),
	}
	defer func() {
		if err != nil {
			// Tear down whatever got started; keep the original error.
			c.Stop()
		}
	}()
	if l := len(c.socketPath()) + len(".lock"); l > maxSocketPath {
		return nil, fmt.Errorf("pgtest: unix socket path %s is too long (%d bytes, limit %d); set Options.BaseDir or TMPDIR to a shorter directory", c.socketPath(), l, maxSocketPath)
	}
	// The marker lets a later Start know whose directory this was.
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"+hostname()+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := chownFor(dir, cred); err != nil {
		return nil, fmt.Errorf("pgtest: giving the cluster directory to OS user %q: %w", osUser, err)
	}

	if err := c.initdb(ctx, cred); err != nil {
		return nil, err
	}
	tInit := time.Since(t0)
	if err := c.run(opts, cred); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	logger.Info("pgtest: cluster started",
		"dir", c.dir, "port", c.port, "fsync", opts.Fsync, "pid", c.proc.Pid,
		"initdb", tInit.Round(time.Millisecond), "total", time.Since(t0).Round(time.Millisecond))
	return c, nil
}

const (
	dirPrefix = "pgtest-"
	ownerFile = "owner.pid"
	// Linux allows 108 bytes in sun_path and macOS 104. Stay well below.
	maxSocketPath = 100
)

func (c *Cluster) socketPath() string {
	return filepath.Join(c.dir, ".s.PGSQL."+strconv.Itoa(c.port))
}

// childEnv is the environment for initdb and postgres. PG* variables are
// dropped so a developer's PGDATA/PGPORT/PGHOST can't redirect anything.
func childEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PG")
	})
	return append(env, "LC_ALL=C")
}

func (c *Cluster) initdb(ctx context.Context, cred *credential) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "initdb"),
		"--pgdata="+c.dataDir,
		"--username="+Superuser,
		"--auth=trust",
		"--encoding=UTF8",
		"--no-locale",
		"--no-sync", // the cluster is throwaway; syncing initdb's files only costs time
	)
	cmd.Dir = c.dir // the server user may not be able to enter the caller's cwd
	cmd.Env = childEnv()
	cmd.SysProcAttr = toolSysProcAttr(cred)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgtest: initdb failed: %w\n%s", err, tail(out.Bytes(), 40))
	}
	return nil
}

func (c *Cluster) serverArgs(opts Options) []string {
	onOff := "off"
	if opts.Fsync {
		onOff = "on"
	}
	settings := map[string]string{
		"listen_addresses":        "",
		"unix_socket_directories": c.dir,
		"port":                    strconv.Itoa(c.port),
		"max_connections":         strconv.Itoa(MaxConnections),
		"fsync":                   onOff,
		"synchronous_commit":      onOff,
		"full_page_writes":        onOff,
		"logging_collector":       "off",
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	args := []string{"-D", c.dataDir}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range settings {
			if !yield(k) {
				return
			}
		}
	}) {
		args = append(args, "-c", k+"="+settings[k])
	}
	return args
}

// run starts the postmaster. The fork happens on a goroutine locked to its
// OS thread, which stays alive (blocked in wait) for as long as the server
// runs: the parent-death signal is tied to the forking thread, so the
// server gets it when the process dies, and not earlier when the Go
// runtime retires some thread.
func (c *Cluster) run(opts Options, cred *credential) error {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	cmd := exec.Command(filepath.Join(c.binDir, "postgres"), c.serverArgs(opts)...)
	cmd.Dir = c.dir
	cmd.Env = childEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = serverSysProcAttr(cred)

	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Deliberately never unlocked: the thread exits with this
		// goroutine, after the server is gone.
		err := cmd.Start()
		logFile.Close() // the child has its own copy
		started <- err
		if err != nil {
			close(c.exited)
			return
		}
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	c.proc = cmd.Process
	return nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	dsn := c.ConnString("postgres") + " connect_timeout=5"
	delay := 5 * time.Millisecond
	var lastErr error
	for {
		conn, err := pgconn.Connect(ctx, dsn)
		if err == nil {
			return conn.Close(ctx)
		}
		lastErr = err
		select {
		case <-c.exited:
			return fmt.Errorf("pgtest: postgres exited during start-up (%v); server log %s:\n%s", c.waitErr, c.logPath, c.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("pgtest: postgres not accepting connections on %s: %w (last error: %v); server log %s:\n%s",
				c.socketPath(), ctx.Err(), lastErr, c.logPath, c.LogTail())
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// ConnString returns a pgx/libpq keyword/value connection string for
// database dbname as the superuser, for example
//
//	host=/tmp/pgtest-123 port=41234 user=postgres dbname=app sslmode=disable
func (c *Cluster) ConnString(dbname string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable",
		quoteConnValue(c.dir), c.port, Superuser, quoteConnValue(dbname))
}

// quoteConnValue quotes v for a keyword/value connection string when needed.
func quoteConnValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\v\f'\\") {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(v) + "'"
}

// Dir is the cluster's temporary directory. It holds the unix socket, the
// data directory ("data") and the server log.
func (c *Cluster) Dir() string { return c.dir }

// SocketDir is the directory of the server's unix socket (the "host" in
// connection strings). It is the same as Dir.
func (c *Cluster) SocketDir() string { return c.dir }

// Port is the server's port number. No TCP port is opened. The number only
// names the socket file.
func (c *Cluster) Port() int { return c.port }

// DataDir is the server's data directory.
func (c *Cluster) DataDir() string { return c.dataDir }

// LogPath is the server log file.
func (c *Cluster) LogPath() string { return c.logPath }

// Pid is the postmaster's process id.
func (c *Cluster) Pid() int { return c.proc.Pid }

// LogTail returns the last lines of the server log.
func (c *Cluster) LogTail() string {
	b, err := readTail(c.logPath, 16<<10)
	if err != nil {
		return fmt.Sprintf("(cannot read server log: %v)", err)
	}
	return tail(b, 30)
}

// Stop shuts the server down (fast shutdown: sessions are aborted) and
// removes the cluster directory. It waits up to a minute for the server
// to exit before it forces an immediate shutdown, then a kill. Stop is
// idempotent and safe for concurrent use: later calls do nothing and return
// the first call's result. It returns an error if the server had already
// exited unexpectedly.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	t0 := time.Now()
	var errs []error
	if c.proc != nil {
		select {
		case <-c.exited:
			errs = append(errs, fmt.Errorf("pgtest: postgres had exited before Stop (%v); server log:\n%s", c.waitErr, c.LogTail()))
		default:
			if !c.signalAndWait(sigFast, time.Minute) &&
				!c.signalAndWait(sigImmediate, 10*time.Second) &&
				!c.signalAndWait(os.Kill, 10*time.Second) {
				errs = append(errs, fmt.Errorf("pgtest: postgres (pid %d) did not exit", c.proc.Pid))
			}
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("pgtest: removing cluster directory: %w", err))
	}
	c.log.Info("pgtest: cluster stopped", "dir", c.dir, "took", time.Since(t0).Round(time.Millisecond))
	return errors.Join(errs...)
}

// signalAndWait sends sig to the postmaster and reports whether it exited
// within d.
func (c *Cluster) signalAndWait(sig os.Signal, d time.Duration) bool {
	if err := c.proc.Signal(sig); err != nil {
		// Already gone (os.ErrProcessDone) or not signalable; wait briefly.
		d = min(d, time.Second)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.exited:
		return true
	case <-t.C:
		return false
	}
}

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
	const pattern = "/usr/lib/postgresql/*/bin"
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
	return "", fmt.Errorf("pgtest: PostgreSQL server binaries (initdb, pg_ctl, postgres) not found; looked in %s. "+
		"Install the server: `apt-get install postgresql` (Debian/Ubuntu), `dnf install postgresql-server` (Fedora), "+
		"`brew install postgresql` (macOS), or put its bin directory on PATH",
		strings.Join(tried, ", "))
}

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

// defaultBaseDir picks where cluster directories go: see Options.BaseDir.
func defaultBaseDir(otherUser, fsync bool) string {
	if !fsync {
		if dir := memoryBaseDir(); dir != "" {
			return dir
		}
	}
	base := os.TempDir()
	// "/pgtest-" + up to 10 random digits + "/.s.PGSQL.NNNNN.lock"
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
			logger.Info("pgtest: removed stale cluster directory", "dir", dir, "owner_pid", owner)
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

// readTail returns up to the last n bytes of a file.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if off := fi.Size() - n; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(f)
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
