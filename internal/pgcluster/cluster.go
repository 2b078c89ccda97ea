package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
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
	// Fsync turns on durable writes. Defaults to false: fsync,
	// synchronous_commit and full_page_writes are all off, which is much
	// faster and fine for throwaway test data. Benchmarks should set it to
	// true so they measure honest commit costs. Then all three settings are
	// on, as in a default PostgreSQL install.
	Fsync bool

	// Logger receives lifecycle events (start, stop, timings). Defaults to
	// none. The server's own log goes to a file in the cluster directory
	// ([Cluster.LogPath]), and its tail is included in start errors.
	Logger *slog.Logger

	// Settings are extra server settings passed as `postgres -c name=value`.
	// They override the defaults (see [Start]).
	Settings map[string]string

	// BinDir is the directory holding initdb and postgres. Defaults to what
	// [FindBinDir] finds.
	BinDir string

	// OSUser is the OS user the server runs as when the caller runs as root
	// (PostgreSQL refuses to run as root). Defaults to "postgres". Ignored
	// when not root.
	OSUser string

	// BaseDir is where the cluster's temporary directory is created.
	// Defaults to /dev/shm when Fsync is off and /dev/shm is a tmpfs with at
	// least 1 GiB free (file creation dominates initdb and CREATE DATABASE,
	// and on ordinary disks both are many times slower); otherwise to
	// os.TempDir(), or /tmp when that is too long for a unix socket path or
	// (when running as root) not traversable by OSUser.
	BaseDir string

	// StartTimeout bounds initdb plus waiting for the server to accept
	// connections. Defaults to 2 minutes.
	StartTimeout time.Duration

	// WALDir puts the write-ahead log (pg_wal) in this directory, as
	// `initdb --waldir` does, for example on a small file system to see
	// what the server does when its WAL volume fills up. It must not
	// exist or be empty, and the server's OS user must be able to create
	// it. Stop does not remove it. Defaults to pg_wal inside the data
	// directory.
	WALDir string

	// WALSegmentMB is the WAL segment size in megabytes (a power of two,
	// 1 to 1024), as `initdb --wal-segsize`: small segments make a WAL
	// volume fill in small, predictable steps. Defaults to 16.
	WALSegmentMB int

	// TCP makes the server also listen on 127.0.0.1, at [Cluster.Port], a
	// port that was free at start. Defaults to false: a unix socket only.
	// Citus nodes need it, since they connect to each other over TCP.
	// ConnString still uses the socket.
	TCP bool
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

	opts Options // resolved: BinDir, OSUser, BaseDir and Logger set
	cred *credential

	mu   sync.Mutex
	srv  *server // the running (or last) postmaster
	down bool    // shut down on purpose (Shutdown): not an error for Stop

	stopOnce sync.Once
	stopErr  error
}

// Start creates and starts a new cluster: initdb in a new temporary
// directory, then postgres with these settings (Options.Settings override
// them):
//
//	listen_addresses = ''            (unix socket only, no TCP; 127.0.0.1 with Options.TCP)
//	unix_socket_directories = <dir>  (the private temp dir)
//	port = <random 20000-59999>      (only names the socket file; a free TCP port with Options.TCP)
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
	t0 := time.Now()
	ctx, cancel := withStartTimeout(ctx, opts)
	defer cancel()
	c, err := create(opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			// Tear down whatever got started; keep the original error.
			c.Stop()
		}
	}()
	if err := c.initdb(ctx); err != nil {
		return nil, err
	}
	tInit := time.Since(t0)
	if err := c.startNew(ctx); err != nil {
		return nil, err
	}
	c.log.Info("pgcluster: cluster started",
		"dir", c.dir, "port", c.port, "fsync", opts.Fsync, "pid", c.Pid(),
		"initdb", tInit.Round(time.Millisecond), "total", time.Since(t0).Round(time.Millisecond))
	return c, nil
}

func withStartTimeout(ctx context.Context, opts Options) (context.Context, context.CancelFunc) {
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	return context.WithTimeout(ctx, timeout)
}

// create resolves opts and makes the cluster's directory, owned by the
// server's OS user. Nothing runs yet.
func create(opts Options) (_ *Cluster, err error) {
	if !supported {
		return nil, errors.New("pgcluster: running PostgreSQL clusters is only supported on unix systems")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	} else if !hasServerBinaries(binDir) {
		return nil, fmt.Errorf("pgcluster: Options.BinDir %s does not hold the PostgreSQL server binaries (initdb, pg_ctl, postgres); "+
			"point it at the server's bin directory (`pg_config --bindir` prints it) or leave it empty to search", binDir)
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
		return nil, fmt.Errorf("pgcluster: creating cluster directory: %w", err)
	}
	opts.BinDir, opts.OSUser, opts.BaseDir, opts.Logger = binDir, osUser, base, logger
	c := &Cluster{
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, "postgres.log"),
		port:    20000 + rand.IntN(40000),
		binDir:  binDir,
		log:     logger,
		opts:    opts,
		cred:    cred,
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if opts.TCP {
		if c.port, err = freeTCPPort(); err != nil {
			return nil, err
		}
	}
	if l := len(c.socketPath()) + len(".lock"); l > maxSocketPath {
		return nil, fmt.Errorf("pgcluster: unix socket path %s is too long (%d bytes, limit %d); set Options.BaseDir or TMPDIR to a shorter directory", c.socketPath(), l, maxSocketPath)
	}
	// The marker lets a later Start know whose directory this was.
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"+hostname()+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if err := chownFor(dir, cred); err != nil {
		return nil, fmt.Errorf("pgcluster: giving the cluster directory to OS user %q: %w", osUser, err)
	}
	return c, nil
}

const (
	dirPrefix = "pgcluster-"
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

func (c *Cluster) initdb(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "initdb"),
		"--pgdata="+c.dataDir,
		"--username="+Superuser,
		"--auth=trust",
		"--encoding=UTF8",
		"--no-locale",
		"--no-sync", // the cluster is throwaway; syncing initdb's files only costs time
	)
	if c.opts.WALDir != "" {
		cmd.Args = append(cmd.Args, "--waldir="+c.opts.WALDir)
	}
	if c.opts.WALSegmentMB != 0 {
		cmd.Args = append(cmd.Args, "--wal-segsize="+strconv.Itoa(c.opts.WALSegmentMB))
	}
	cmd.Dir = c.dir // the server user may not be able to enter the caller's cwd
	cmd.Env = childEnv()
	cmd.SysProcAttr = toolSysProcAttr(c.cred)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgcluster: initdb failed: %w\n%s", err, tail(out.Bytes(), 40))
	}
	return nil
}

func (c *Cluster) serverArgs(opts Options) []string {
	onOff := "off"
	if opts.Fsync {
		onOff = "on"
	}
	listen := ""
	if opts.TCP {
		listen = "127.0.0.1"
	}
	settings := map[string]string{
		"listen_addresses":        listen,
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

// startNew is the first start of a new cluster. With Options.TCP, another
// process may take the port between our probe and the server's bind; then
// it tries another port.
func (c *Cluster) startNew(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := c.startServer(ctx)
		if err == nil || !c.opts.TCP || attempt == 3 || !strings.Contains(err.Error(), "could not bind") {
			return err
		}
		if c.port, err = freeTCPPort(); err != nil {
			return err
		}
	}
}

// server is one run of the postmaster.
type server struct {
	proc    *os.Process
	exited  chan struct{} // closed when the postmaster has exited
	waitErr error         // valid after exited is closed
}

// startServer starts the postmaster and waits until it accepts connections.
func (c *Cluster) startServer(ctx context.Context) error {
	srv, err := c.run()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.srv, c.down = srv, false
	c.mu.Unlock()
	return c.waitReady(ctx, srv)
}

// run starts the postmaster. The fork happens on a goroutine locked to its
// OS thread, which stays alive (blocked in wait) for as long as the server
// runs: the parent-death signal is tied to the forking thread, so the
// server gets it when the process dies, and not earlier when the Go
// runtime retires some thread.
func (c *Cluster) run() (*server, error) {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	cmd := exec.Command(filepath.Join(c.binDir, "postgres"), c.serverArgs(c.opts)...)
	cmd.Dir = c.dir
	cmd.Env = childEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = serverSysProcAttr(c.cred)

	srv := &server{exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Deliberately never unlocked: the thread exits with this
		// goroutine, after the server is gone.
		err := cmd.Start()
		logFile.Close() // the child has its own copy
		started <- err
		if err != nil {
			close(srv.exited)
			return
		}
		srv.waitErr = cmd.Wait()
		close(srv.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("pgcluster: starting postgres: %w", err)
	}
	srv.proc = cmd.Process
	return srv, nil
}

func (c *Cluster) waitReady(ctx context.Context, srv *server) error {
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
		case <-srv.exited:
			return fmt.Errorf("pgcluster: postgres exited during start-up (%v); server log %s:\n%s", srv.waitErr, c.logPath, c.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: postgres not accepting connections on %s: %w (last error: %v); server log %s:\n%s",
				c.socketPath(), ctx.Err(), lastErr, c.logPath, c.LogTail())
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// ConnString returns a pgx/libpq keyword/value connection string for
// database dbname as the superuser, for example
//
//	host=/tmp/pgcluster-123 port=41234 user=postgres dbname=app sslmode=disable
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

// Port is the server's port number. Without Options.TCP no TCP port is
// opened, and the number only names the socket file; with it, the server
// also listens on 127.0.0.1 at this port.
func (c *Cluster) Port() int { return c.port }

// freeTCPPort returns a loopback port that nothing uses right now. It
// prefers ports below Linux's default ephemeral range (32768-60999), so an
// outgoing connection (Citus opens many) cannot take the port while the
// server is down for a restart.
func freeTCPPort() (int, error) {
	for range 50 {
		port := 20000 + rand.IntN(12000)
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: finding a free TCP port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// DataDir is the server's data directory.
func (c *Cluster) DataDir() string { return c.dataDir }

// LogPath is the server log file.
func (c *Cluster) LogPath() string { return c.logPath }

// Pid is the postmaster's process id.
func (c *Cluster) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.srv == nil {
		return 0
	}
	return c.srv.proc.Pid
}

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
	c.mu.Lock()
	srv, down := c.srv, c.down
	c.down = true
	c.mu.Unlock()
	if srv != nil {
		select {
		case <-srv.exited:
			if !down {
				errs = append(errs, fmt.Errorf("pgcluster: postgres had exited before Stop (%v); server log:\n%s", srv.waitErr, c.LogTail()))
			}
		default:
			if !srv.signalAndWait(sigFast, time.Minute) &&
				!srv.signalAndWait(sigImmediate, 10*time.Second) &&
				!srv.signalAndWait(os.Kill, 10*time.Second) {
				errs = append(errs, fmt.Errorf("pgcluster: postgres (pid %d) did not exit", srv.proc.Pid))
			}
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("pgcluster: removing cluster directory: %w", err))
	}
	c.log.Info("pgcluster: cluster stopped", "dir", c.dir, "took", time.Since(t0).Round(time.Millisecond))
	return errors.Join(errs...)
}

// signalAndWait sends sig to the postmaster and reports whether it exited
// within d.
func (s *server) signalAndWait(sig os.Signal, d time.Duration) bool {
	if err := s.proc.Signal(sig); err != nil {
		// Already gone (os.ErrProcessDone) or not signalable; wait briefly.
		d = min(d, time.Second)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.exited:
		return true
	case <-t.C:
		return false
	}
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
