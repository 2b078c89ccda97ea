package drills

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/drillkit"
	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/schema"
)

// citusEnv is a Citus drill: a coordinator and two workers, pginbox's
// Citus schema and the colocated business table, tenants on both workers,
// a client and a running worker on the coordinator, and one load per
// worker node (its tenants only), as a transport with a consumer per
// partition delivers.
type citusEnv struct {
	c     *pgcluster.Citus
	admin *pgxpool.Pool
	app   *app
	// onNodes: the client and the worker run their sessions on the worker
	// nodes (inbox.Nodes), not through the coordinator.
	onNodes bool
	// tenants holds each worker node's tenants, in the order of c.Workers.
	tenants [][]string
	loads   []*drillkit.Running
	applied appliedLog
}

// citusDB is the drill's database on every node.
const citusDB = "drill"

// sessionModes are where a Citus drill's client and worker run their
// sessions: through the coordinator, or on the worker nodes (inbox.Nodes).
var sessionModes = []string{"coordinator", "nodes"}

// startCitusEnv starts the cluster and the app, with tenants spread over
// the two workers (at least two on each), the app's sessions as mode says
// (sessionModes).
func startCitusEnv(t *testing.T, tenants int, mode string) *citusEnv {
	t.Helper()
	ctx := t.Context()
	c, err := pgcluster.StartCitus(ctx, pgcluster.CitusOptions{Node: pgcluster.Options{Settings: drillSettings(nil)}})
	if errors.Is(err, pgcluster.ErrCitusNotInstalled) && os.Getenv("CI") != "true" {
		t.Skipf("drills: skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := c.CreateDatabase(ctx, citusDB); err != nil {
		t.Fatal(err)
	}
	dsn := c.ConnString(citusDB)
	if _, err := schema.MigrateCitus(ctx, dsn, schema.CitusOptions{}); err != nil {
		t.Fatal(err)
	}
	e := &citusEnv{c: c, admin: newPool(t, dsn, "drill-admin", 4), tenants: make([][]string, len(c.Workers))}
	if err := drillkit.CreateCitusEffects(ctx, e.admin); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < tenants || len(e.tenants[0]) < 2 || len(e.tenants[1]) < 2; i++ {
		tenant := fmt.Sprintf("tenant-%03d", i)
		_, node, err := c.ShardOf(ctx, citusDB, "pginbox_receipts", tenant)
		if err != nil {
			t.Fatal(err)
		}
		for w, n := range c.Workers {
			if n == node {
				e.tenants[w] = append(e.tenants[w], tenant)
			}
		}
	}
	apply := func(ctx context.Context, m *handler.Msg) error {
		if err := drillkit.CitusApply(ctx, m); err != nil {
			return err
		}
		e.applied.add(m.Scope.ID)
		return nil
	}
	cfg := appConfig{registry: drillkit.CitusRegistry(apply)}
	if mode == "nodes" {
		// Placements read every second, so the shard move drill's tenant
		// goes to its new node soon after the move.
		nodes, err := inbox.ConnectNodes(ctx, e.admin, inbox.NodesConfig{Refresh: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nodes.Close) // after the app's clean-ups: they run first
		cfg.client.Nodes, cfg.worker.Nodes = nodes, nodes
		e.onNodes = true
	}
	e.app = startApp(t, dsn, cfg)
	testkit.Eventually(t, 10*time.Second, func() bool { return listening(t, e.admin) }, "the worker to LISTEN")
	return e
}

// load starts one load per worker node, count messages at rate per second
// in all.
func (e *citusEnv) load(t *testing.T, count int, rate float64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for w, tenants := range e.tenants {
		e.loads = append(e.loads, drillkit.Load{
			Client:  e.app.client,
			Message: drillkit.CitusMessages(fmt.Sprintf("w%d-", w), tenants),
			Count:   count / len(e.tenants), Rate: rate / float64(len(e.tenants)), Senders: 4,
		}.Start(ctx))
	}
}

// acked is the number of accepts acknowledged by every load.
func (e *citusEnv) acked() int {
	n := 0
	for _, l := range e.loads {
		n += len(l.Snapshot().Acked)
	}
	return n
}

// waitAcked waits until the loads acknowledged n accepts.
func (e *citusEnv) waitAcked(t *testing.T, n int) {
	t.Helper()
	testkit.Eventually(t, 2*time.Minute, func() bool { return e.acked() >= n }, "%d acknowledged accepts", n)
}

// failed is the number of accepts of worker w's load that failed (and were
// redelivered).
func (e *citusEnv) failed(w int) int {
	o := e.loads[w].Snapshot()
	return o.Uncertain + o.Retryable
}

// ackedBetween is how many accepts worker w's load acknowledged in [from, to).
func (e *citusEnv) ackedBetween(w int, from, to time.Time) int {
	n := 0
	for _, at := range e.loads[w].Snapshot().AckedAt {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// firstAckAfter waits for worker w's load's first acknowledgement after
// after, and returns its time.
func (e *citusEnv) firstAckAfter(t *testing.T, w int, after time.Time) time.Time {
	t.Helper()
	var at time.Time
	testkit.Eventually(t, 2*time.Minute, func() bool {
		var ok bool
		at, ok = e.loads[w].Snapshot().FirstAckAfter(after)
		return ok
	}, "an accept acknowledged after the fault")
	return at
}

// finish waits for the loads and the worker, prints the drill's summary
// line and fails the drill on any loss, double, torn commit, DEAD receipt
// or accept the loads gave up on.
func (e *citusEnv) finish(t *testing.T, drill string, recovery time.Duration, more ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var all drillkit.Outcome
	for _, l := range e.loads {
		out, err := l.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all.Sent += out.Sent
		all.Attempts += out.Attempts
		all.Acked = append(all.Acked, out.Acked...)
		all.Uncertain += out.Uncertain
		all.Retryable += out.Retryable
		all.Rejected += out.Rejected
		all.GaveUp = append(all.GaveUp, out.GaveUp...)
		for class, text := range out.Errors {
			t.Logf("first %s accept error: %s", class, text)
		}
	}
	settled := testkit.Poll(2*time.Minute, func() bool {
		ok, err := drillkit.Settled(ctx, e.admin)
		if err != nil {
			t.Logf("checking receipts: %v", err)
		}
		return ok
	})
	if !settled {
		e.diagnose(t)
		t.Fatalf("drill %s: the worker did not settle every receipt within 2m", drill)
	}
	tally, err := drillkit.CountCitus(ctx, e.admin, all.Acked)
	if err != nil {
		t.Fatal(err)
	}
	more = append(more, fmt.Sprintf("tenants=%d+%d attempts=%d uncertain=%d retryable=%d",
		len(e.tenants[0]), len(e.tenants[1]), all.Attempts, all.Uncertain, all.Retryable))
	fmt.Println(tally.Line(drill, all.Sent, recovery, more...)) // the summary line, also without -v
	if tally.Missing != 0 || tally.Unapplied != 0 || tally.Doubled != 0 || tally.Torn != 0 || tally.Statuses["DEAD"] != 0 {
		t.Errorf("drill %s failed: missing=%d unapplied=%d doubled=%d torn=%d dead=%d",
			drill, tally.Missing, tally.Unapplied, tally.Doubled, tally.Torn, tally.Statuses["DEAD"])
	}
	if len(all.GaveUp) != 0 || all.Rejected != 0 || len(all.Acked) != all.Sent {
		t.Errorf("drill %s: %d of %d messages acknowledged, %d given up, %d rejected", drill, len(all.Acked), all.Sent, len(all.GaveUp), all.Rejected)
	}
	if lines := e.app.logs.firstLines(); len(lines) > 0 {
		t.Logf("worker warnings and errors: %d, first of each:\n%s", e.app.logs.total(), strings.Join(lines, "\n"))
	}
}

// diagnose logs what is left unsettled, and where.
func (e *citusEnv) diagnose(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`SELECT status || ' ' || scope_id || ' ' || count(*) || ' lease ' || coalesce(max(lease_expires_at)::text, '-') || ' due ' || coalesce(min(available_at)::text, '-') FROM pginbox_receipts_live WHERE status IN ('PENDING', 'RETRYABLE', 'PROCESSING') GROUP BY status, scope_id`,
		`SELECT 'dist_tx ' || count(*) FROM pg_dist_transaction`,
		`SELECT 'now ' || now()::text`,
	} {
		rows, err := e.admin.Query(ctx, q)
		if err != nil {
			t.Logf("%s: %v", q, err)
			continue
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err == nil {
				t.Logf("unsettled: %s", s)
			}
		}
		rows.Close()
	}
	t.Logf("worker warnings and errors: %d, first of each:\n%s", e.app.logs.total(), strings.Join(e.app.logs.firstLines(), "\n"))
}

// appliedLog records when the handler applied a message, and for which
// tenant (its transaction may still roll back).
type appliedLog struct {
	mu  sync.Mutex
	at  []time.Time
	who []string
}

func (l *appliedLog) add(tenant string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = append(l.at, time.Now())
	l.who = append(l.who, tenant)
}

// between counts the applies in [from, to) of the tenants in of.
func (l *appliedLog) between(of []string, from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for i, at := range l.at {
		if !at.Before(from) && at.Before(to) {
			for _, t := range of {
				if l.who[i] == t {
					n++
					break
				}
			}
		}
	}
	return n
}
