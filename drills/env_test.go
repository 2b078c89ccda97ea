package drills

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/drillkit"
	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/testkit"
)

// envDrills turns on the full drills.
const envDrills = "PGINBOX_DRILLS"

// full reports whether the full drills run (make drills).
func full() bool { return os.Getenv(envDrills) != "" }

// requireFull skips a drill that has no smoke version outside `make drills`.
func requireFull(t *testing.T) {
	t.Helper()
	if !full() {
		t.Skipf("slow failure drill: run `make drills` (or set %s=1)", envDrills)
	}
}

// size picks the full or the smoke figure.
func size[T any](fullValue, smoke T) T {
	if full() {
		return fullValue
	}
	return smoke
}

// Application names of the drill's connections, to find (and kill) them.
const (
	appAccept = "drill-accept"
	appWorker = "drill-worker"
)

// drillSettings are every drill cluster's settings: synchronous_commit on, so
// an acknowledged commit's WAL is written before the reply and survives a
// server crash. fsync stays off (Options.Fsync false): no drill crashes the
// operating system, so the page cache keeps what was written.
func drillSettings(more map[string]string) map[string]string {
	s := map[string]string{"synchronous_commit": "on"}
	maps.Copy(s, more)
	return s
}

// startCluster starts a drill cluster with settings, stopped at test end.
func startCluster(t *testing.T, settings map[string]string) *pgcluster.Cluster {
	t.Helper()
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{Settings: drillSettings(settings)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// prepare creates the application's role, database, schema and business
// table on c, and returns a superuser pool on that database and the
// application's DSN.
func prepare(t *testing.T, c *pgcluster.Cluster) (*pgxpool.Pool, string) {
	t.Helper()
	dsn, err := drillkit.Prepare(t.Context(), c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	return newPool(t, c.ConnString(drillkit.Database), "drill-admin", 4), dsn
}

// newPool is a pool on dsn with application_name app, closed at test end.
func newPool(t *testing.T, dsn, app string, maxConns int32, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	for _, f := range configure {
		f(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// app is what a service runs: a Client on its pool and a Worker on another.
type app struct {
	acceptPool, workerPool *pgxpool.Pool
	client                 *inbox.Client
	worker                 *inbox.Worker
	logs                   *logCounter
	// Connection attempts of each pool.
	acceptConnects, workerConnects atomic.Int64
}

// appConfig adjusts an app before it starts.
type appConfig struct {
	client inbox.Config
	worker inbox.WorkerConfig
	pool   func(*pgxpool.Config) // both pools
	// registry defaults to drillkit.Registry().
	registry *handler.Registry
}

// startApp starts a client and a running worker on dsn. The worker's lease
// is 3s (the default is 30s) so that lease recovery shows within a drill.
func startApp(t *testing.T, dsn string, cfg appConfig) *app {
	t.Helper()
	a := &app{logs: &logCounter{}}
	count := func(n *atomic.Int64) func(*pgxpool.Config) {
		return func(c *pgxpool.Config) {
			c.BeforeConnect = func(context.Context, *pgx.ConnConfig) error {
				n.Add(1)
				return nil
			}
			if cfg.pool != nil {
				cfg.pool(c)
			}
		}
	}
	a.acceptPool = newPool(t, dsn, appAccept, 6, count(&a.acceptConnects))
	a.workerPool = newPool(t, dsn, appWorker, 6, count(&a.workerConnects))
	var err error
	cc := cfg.client
	cc.Logger = slog.New(a.logs)
	a.client, err = inbox.NewClient(a.acceptPool, cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.client.Close)
	wc := cfg.worker
	if wc.Concurrency == 0 {
		wc.Concurrency = 3
	}
	if wc.Lease == 0 {
		wc.Lease = 3 * time.Second
	}
	wc.Logger = slog.New(a.logs)
	reg := cfg.registry
	if reg == nil {
		reg = drillkit.Registry()
	}
	a.worker, err = inbox.NewWorker(a.workerPool, reg, wc)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.worker.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.worker.Stop(ctx); err != nil {
			t.Errorf("stopping the worker: %v", err)
		}
	})
	return a
}

// load runs count accepts through a's client at rate per second.
func (a *app) load(t *testing.T, count int, rate float64) *drillkit.Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return drillkit.Load{Client: a.client, Count: count, Rate: rate, Senders: 4}.Start(ctx)
}

// waitAcked waits until the load acknowledged n accepts.
func waitAcked(t *testing.T, r *drillkit.Running, n int) {
	t.Helper()
	testkit.Eventually(t, time.Minute, func() bool { return len(r.Snapshot().Acked) >= n }, "%d acknowledged accepts", n)
}

// firstAckAfter waits for the load's first acknowledgement after t and
// returns its time.
func firstAckAfter(t *testing.T, r *drillkit.Running, after time.Time) time.Time {
	t.Helper()
	var at time.Time
	var s drillkit.Outcome
	testkit.Eventually(t, time.Minute, func() bool {
		s = r.Snapshot()
		var ok bool
		at, ok = s.FirstAckAfter(after)
		return ok
	}, "an accept acknowledged after the fault; the load saw %v", testkit.Lazy(func() string {
		// What the load saw tells a failure apart from a slow machine.
		return fmt.Sprintf("sent=%d acked=%d gave_up=%d attempts=%d codes=%v errors=%v",
			s.Sent, len(s.Acked), len(s.GaveUp), s.Attempts, s.Codes, s.Errors)
	}))
	return at
}

// finish waits for the load, lets the worker settle every receipt, prints
// the drill's summary line and fails the drill on any loss, double, torn
// commit, DEAD receipt or accept the load gave up on.
func finish(t *testing.T, drill string, db drillkit.Querier, r *drillkit.Running, recovery time.Duration, more ...string) drillkit.Tally {
	t.Helper()
	tally := settle(t, drill, db, r, recovery, more...)
	if tally.Missing != 0 {
		t.Errorf("drill %s failed: %d acknowledged accepts have no receipt", drill, tally.Missing)
	}
	return tally
}

// settle is finish without the check that every acknowledged accept was
// stored: for asynchronous replication, where losing some is the documented
// boundary.
func settle(t *testing.T, drill string, db drillkit.Querier, r *drillkit.Running, recovery time.Duration, more ...string) drillkit.Tally {
	t.Helper()
	wctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	out, err := r.Wait(wctx)
	if err != nil {
		t.Fatal(err)
	}
	// Each check gets its own deadline: a slow load must not use up the
	// settling's time (on a loaded machine the load can take minutes).
	testkit.Eventually(t, 2*time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		ok, err := drillkit.Settled(ctx, db)
		if err != nil {
			t.Logf("checking receipts: %v", err)
		}
		return ok
	}, "the worker to settle every receipt")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tally, err := drillkit.Count(ctx, db, out.Acked)
	if err != nil {
		t.Fatal(err)
	}
	more = append(more, fmt.Sprintf("planned=%d attempts=%d uncertain=%d retryable=%d", out.Planned, out.Attempts, out.Uncertain, out.Retryable))
	fmt.Println(tally.Line(drill, out.Sent, recovery, more...)) // the summary line, also without -v
	for class, text := range out.Errors {
		t.Logf("first %s accept error: %s", class, text)
	}
	if tally.Unapplied != 0 || tally.Doubled != 0 || tally.Torn != 0 || tally.Statuses["DEAD"] != 0 {
		t.Errorf("drill %s failed: unapplied=%d doubled=%d torn=%d dead=%d",
			drill, tally.Unapplied, tally.Doubled, tally.Torn, tally.Statuses["DEAD"])
	}
	for _, p := range loadProblems(out) {
		t.Errorf("drill %s: %s", drill, p)
	}
	return tally
}

// loadProblems is what went wrong with a drill's load itself: fewer
// messages sent than planned (a load cut short makes every count vacuous),
// or messages never acknowledged.
func loadProblems(out drillkit.Outcome) []string {
	var p []string
	if out.Planned == 0 || out.Sent != out.Planned {
		p = append(p, fmt.Sprintf("%d of %d planned messages sent", out.Sent, out.Planned))
	}
	if len(out.GaveUp) != 0 || out.Rejected != 0 || len(out.Acked) != out.Sent {
		p = append(p, fmt.Sprintf("%d of %d messages acknowledged, %d given up, %d rejected", len(out.Acked), out.Sent, len(out.GaveUp), out.Rejected))
	}
	return p
}

// listening reports whether a worker session LISTENs on the server.
func listening(t *testing.T, admin *pgxpool.Pool) bool {
	t.Helper()
	var n int
	err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE '%LISTEN pginbox_receipt%' AND state = 'idle'`, appWorker).Scan(&n)
	return err == nil && n > 0
}

// logCounter is a slog handler that counts a worker's warnings and errors
// and keeps the first of each message.
type logCounter struct {
	mu     sync.Mutex
	counts map[slog.Level]int
	byMsg  map[string]int
	first  []string
}

func (l *logCounter) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn
}

func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts, l.byMsg = map[slog.Level]int{}, map[string]int{}
	}
	l.counts[r.Level]++
	l.byMsg[r.Message]++
	if l.byMsg[r.Message] == 1 { // the first of each kind
		l.first = append(l.first, r.Level.String()+" "+b.String())
	}
	return nil
}

func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }

// byMessage is how many warnings and errors were logged, by message.
func (l *logCounter) byMessage() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.byMsg)
}

// worker is the number of warnings and errors the worker logged (its
// messages begin "pginbox worker:"); the accept side's, such as a failed
// wake-up after a commit, are bounded by the Accept calls.
func (l *logCounter) worker() int {
	n := 0
	for msg, c := range l.byMessage() {
		if strings.HasPrefix(msg, "pginbox worker:") {
			n += c
		}
	}
	return n
}

// total is the number of warnings and errors logged.
func (l *logCounter) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.counts {
		n += c
	}
	return n
}

// count is how often message was logged.
func (l *logCounter) count(message string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byMsg[message]
}

func (l *logCounter) firstLines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.first...)
}
