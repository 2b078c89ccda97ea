//go:build unix

package inbox_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/childtest"
	"github.com/pginbox/pginbox/internal/testkit"
)

// The crash and signal tests run workers in child processes: re-executions of
// this test binary running only TestCrashChild, told what to do by the
// environment. Children report progress with marker lines on stdout.
const (
	envChildDSN   = "PGINBOX_CHILD_DSN"
	envChildMode  = "PGINBOX_CHILD_MODE"
	envChildRound = "PGINBOX_CHILD_ROUND"
	envChildPoint = "PGINBOX_CHILD_POINT"  // crash loop: where the child stops
	envChildPerTx = "PGINBOX_CHILD_PER_TX" // crash loop: MessagesPerTx

	// childAppName names the children's sessions, for childSessionsGone.
	childAppName = "pginbox-crash-child"

	// childLease is short so the parent recovers a killed child's claims quickly.
	childLease  = 500 * time.Millisecond
	crashRounds = 5
)

// TestCrashChild is the child process of the crash and signal tests; run
// directly it skips.
func TestCrashChild(t *testing.T) {
	dsn := os.Getenv(envChildDSN)
	if dsn == "" {
		t.Skip("only runs as a child process of the crash tests")
	}
	childtest.ExitWithParent()
	pool := poolFor(t, dsn, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["application_name"] = childAppName })
	switch mode := os.Getenv(envChildMode); mode {
	case "accept":
		childAccept(t, pool)
	case "claim", "commit":
		childCrashingWorker(t, pool, mode)
	case "sigterm":
		childSignalledWorker(t, pool)
	case "loop":
		childCrashLoopWorker(t, pool)
	case "ordered":
		childOrderedWorker(t, pool)
	default:
		t.Fatalf("unknown child mode %q", mode)
	}
}

// blockUntilKilled parks the calling goroutine; the parent kills the process.
func blockUntilKilled() {
	for {
		time.Sleep(time.Hour)
	}
}

// childAccept accepts messages until it is killed, reporting each committed
// Accept (the acknowledgement a broker would get).
func childAccept(t *testing.T, pool *pgxpool.Pool) {
	c := newClient(t, pool, inbox.Config{})
	round := os.Getenv(envChildRound)
	for i := 0; ; i++ {
		id := fmt.Sprintf("r%s-a%d", round, i)
		if _, err := c.Accept(context.Background(), orderMsg(id, map[string]string{"orderId": id})); err != nil {
			t.Fatal(err)
		}
		childtest.Mark("accepted %s", id)
	}
}

// childCrashingWorker drains with a hook that stops the worker at the crash
// point, and waits there to be killed.
func childCrashingWorker(t *testing.T, pool *pgxpool.Pool, mode string) {
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		return writeEffect(ctx, m, "child")
	}), inbox.WorkerConfig{Concurrency: 2, Lease: childLease})
	switch mode {
	case "claim":
		inbox.SetTestHooks(w, func(n int) {
			childtest.Mark("claimed %d", n)
			blockUntilKilled()
		}, nil)
	case "commit":
		inbox.SetTestHooks(w, nil, func(id inbox.ID) {
			childtest.Mark("committing %s", id)
			blockUntilKilled()
		})
	}
	n, err := w.Drain(context.Background())
	t.Fatalf("Drain returned (%d, %v) without reaching the crash point", n, err)
}

// childSignalledWorker runs a worker until SIGTERM, as a service's main would.
func childSignalledWorker(t *testing.T, pool *pgxpool.Pool) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		childtest.Mark("started %s", m.MessageID)
		time.Sleep(300 * time.Millisecond)
		return writeEffect(ctx, m, "child")
	}), inbox.WorkerConfig{Concurrency: 4, ShutdownGrace: 10 * time.Second})
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

func startChild(t *testing.T, dsn, mode string, round int, env ...string) *childtest.Child {
	t.Helper()
	env = append([]string{envChildDSN + "=" + dsn, envChildMode + "=" + mode, fmt.Sprintf("%s=%d", envChildRound, round)}, env...)
	return childtest.Start(t, "TestCrashChild", env...)
}

// waitChildSessionsGone waits until the server holds no session of a killed
// child. SIGKILL ends the process, not what it already sent: a COMMIT in the
// socket still commits after the child is reaped (an accept invisible until
// then, so nothing else makes the parent wait for it), until the backend
// reads the end of the connection and exits. Only then is what the child
// committed final, and a drain sees all of it.
func waitChildSessionsGone(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, childAppName).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n == 0
	}, "%s", "the killed child's sessions to end")
}

// recoverAll waits for the killed child's sessions to end, then for its
// leases to expire, and recovers them with w, until nothing is PROCESSING.
func recoverAll(t *testing.T, pool *pgxpool.Pool, w *inbox.Worker) int {
	t.Helper()
	waitChildSessionsGone(t, pool)
	total := 0
	testkit.Eventually(t, 15*time.Second, func() bool {
		n, err := w.RecoverExpired(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		total += n
		return countRows(t, pool, "status = 'PROCESSING'") == 0
	}, "%s", "the killed child's claims to be recovered")
	return total
}

func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"accept", "claim", "commit"} {
		t.Run(mode, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			pool, dsn := newPool(t)
			setupEffects(t, pool)
			c := newClient(t, pool, inbox.Config{})
			w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
				return writeEffect(ctx, m, "parent")
			}), inbox.WorkerConfig{Lease: childLease})

			var acked []string
			for round := range crashRounds {
				if mode != "accept" {
					for i := range 3 {
						id := fmt.Sprintf("r%d-m%d", round, i)
						acceptAll(t, c, orderMsg(id, map[string]string{"orderId": id}))
					}
				}
				ch := startChild(t, dsn, mode, round)
				switch mode {
				case "accept":
					// Kill after a varying number of acknowledged accepts.
					for range round + 1 {
						id, ok := strings.CutPrefix(ch.Marker(t), "accepted ")
						is.True(ok)
						acked = append(acked, id)
					}
					ch.Kill(t)

				case "claim":
					var n int
					_, err := fmt.Sscanf(ch.Marker(t), "claimed %d", &n)
					is.NoErr(err)
					is.Equal(countRows(t, pool, "status = 'PROCESSING'"), n)
					ch.Kill(t)

				case "commit":
					idText, ok := strings.CutPrefix(ch.Marker(t), "committing ")
					is.True(ok)
					id, err := inboxtype.Parse(idText)
					is.NoErr(err)
					// The completion update ran but did not commit: invisible.
					is.Equal(effectCount(t, pool, "receipt_id = $1", id), 0)
					is.Equal(stateOf(t, pool, id).Status, "PROCESSING")
					ch.Kill(t)
					is.Equal(effectCount(t, pool, "receipt_id = $1", id), 0)
					is.Equal(stateOf(t, pool, id).Status, "PROCESSING")
				}

				recovered := recoverAll(t, pool, w)
				drained, err := w.Drain(ctx)
				is.NoErr(err)
				t.Logf("round %d: recovered %d, drained %d", round, recovered, drained)
				if mode != "accept" {
					is.True(recovered > 0)
				}
				requireOneEffectPerReceipt(t, pool, -1)
				if t.Failed() {
					t.FailNow()
				}
			}
			if mode == "accept" {
				// No acknowledged message was lost.
				is.Equal(countRows(t, pool, "message_id = ANY($1)", acked), len(acked))
			} else {
				is.Equal(countRows(t, pool, "true"), 3*crashRounds)
				is.True(countRows(t, pool, "attempts > 1") > 0) // some were re-run after a crash
			}
		})
	}
}

func TestSIGTERMDrainsGracefully(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, dsn := newPool(t)
	setupEffects(t, pool)
	c := newClient(t, pool, inbox.Config{})
	const backlog = 40 // ten times the child's concurrency
	for i := range backlog {
		id := fmt.Sprintf("m%02d", i)
		acceptAll(t, c, orderMsg(id, map[string]string{"orderId": id}))
	}

	ch := startChild(t, dsn, "sigterm", 0)
	started := map[string]bool{}
	for len(started) < 6 { // mid-drain: the second batch is running
		id, ok := strings.CutPrefix(ch.Marker(t), "started ")
		is.True(ok)
		started[id] = true
	}
	ch.Signal(t, syscall.SIGTERM)
	select {
	case <-ch.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("child did not exit after SIGTERM")
	}
	if err := ch.Err(); err != nil {
		t.Fatalf("child exited with %v:\n%s", err, ch.Output())
	}
	for _, m := range ch.PendingMarkers() {
		started[strings.TrimPrefix(m, "started ")] = true
	}

	// Every started handler finished and committed; nothing else was spent.
	is.Equal(countRows(t, pool, "status = 'PROCESSING'"), 0)
	is.Equal(countRows(t, pool, "status = 'COMPLETED'"), len(started))
	is.Equal(countRows(t, pool, "status = 'PENDING' AND attempts = 0"), backlog-len(started))
	for id := range started {
		is.Equal(countRows(t, pool, "message_id = $1 AND status = 'COMPLETED'", id), 1)
		is.Equal(effectCount(t, pool, "message_id = $1", id), 1)
	}
	is.Equal(effectCount(t, pool, "true"), len(started))
	t.Logf("%d of %d handled before the child exited, %d claims released unstarted",
		len(started), backlog, countRows(t, pool, "status = 'PENDING' AND version > 1"))
}

// Kill points of the crash loop, in the order a message passes them.
var crashPoints = []string{"write", "written", "commit", "committing", "committed"}

// childCrashLoopWorker runs a started worker (batching when told to) that
// reports the first time a message reaches the crash point and, except for
// "committing", waits there to be killed.
func childCrashLoopWorker(t *testing.T, pool *pgxpool.Pool) {
	point := os.Getenv(envChildPoint)
	perTx, err := strconv.Atoi(os.Getenv(envChildPerTx))
	if err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	armed.Store(true)
	first := func() bool { return armed.CompareAndSwap(true, false) }
	w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
		switch {
		case point == "write" && first():
			childtest.Mark("writing %s", m.MessageID)
			// The kill lands while the server executes the business write.
			_, err := m.Tx.Exec(ctx, "INSERT INTO effects SELECT $1, $2, 'child', $3 FROM pg_sleep(1)", m.MessageID, m.ReceiptID, m.Attempt)
			return err
		case point == "written":
			if err := writeEffect(ctx, m, "child"); err != nil {
				return err
			}
			if first() {
				childtest.Mark("written %s", m.MessageID)
				blockUntilKilled()
			}
			return nil
		}
		return writeEffect(ctx, m, "child")
	}), inbox.WorkerConfig{Concurrency: 2, MessagesPerTx: perTx, Lease: childLease, PollInterval: 20 * time.Millisecond})
	switch point {
	case "commit":
		inbox.SetTestHooks(w, nil, func(id inbox.ID) {
			if first() {
				childtest.Mark("committing %s", id)
				blockUntilKilled()
			}
		})
	case "committing":
		// The parent kills on this line while the COMMIT is on its way.
		inbox.SetTestHooks(w, nil, func(id inbox.ID) {
			if first() {
				childtest.Mark("committing %s", id)
			}
		})
	case "committed":
		inbox.SetAfterCommitHook(w, func(id inbox.ID) {
			if first() {
				childtest.Mark("committed %s", id)
				blockUntilKilled()
			}
		})
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	blockUntilKilled()
}

// crashLoopRounds is how many kills each point gets: PGINBOX_CRASH_ROUNDS, or
// 1 so make check stays quick. `PGINBOX_CRASH_ROUNDS=20 go test -run
// TestCrashLoop -v ./inbox` is the long run.
func crashLoopRounds(t *testing.T) int {
	if v := os.Getenv("PGINBOX_CRASH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PGINBOX_CRASH_ROUNDS=%q: want a positive number", v)
		}
		return n
	}
	return 1
}

// TestCrashLoop SIGKILLs a real worker process at every point a message passes
// (during the business write, after it, before COMMIT, during COMMIT, after
// COMMIT), one message per transaction and batched, round after round; after
// each kill a fresh worker recovers and drains, and the database must hold
// every receipt COMPLETED with exactly one business effect.
func TestCrashLoop(t *testing.T) {
	t.Parallel()
	rounds := crashLoopRounds(t)
	for _, perTx := range []int{1, 5} {
		for _, point := range crashPoints {
			t.Run(fmt.Sprintf("%s/MessagesPerTx=%d", point, perTx), func(t *testing.T) {
				ctx := context.Background()
				pool, dsn := newPool(t)
				setupEffects(t, pool)
				c := newClient(t, pool, inbox.Config{})
				w := newWorker(t, pool, registry(t, func(ctx context.Context, m *handler.Msg) error {
					return writeEffect(ctx, m, "parent")
				}), inbox.WorkerConfig{Lease: childLease})
				accepted := 0
				for round := range rounds {
					for i := range 8 {
						id := fmt.Sprintf("r%d-m%d", round, i)
						acceptAll(t, c, orderMsg(id, map[string]string{"orderId": id}))
						accepted++
					}
					ch := startLoopChild(t, dsn, point, perTx)
					m := ch.Marker(t)
					if !strings.HasPrefix(m, map[string]string{"write": "writing ", "written": "written ", "commit": "committing ",
						"committing": "committing ", "committed": "committed "}[point]) {
						t.Fatalf("unexpected marker %q", m)
					}
					ch.Kill(t)
					recoverAll(t, pool, w)
					if _, err := w.Drain(ctx); err != nil {
						t.Fatal(err)
					}
					requireOneEffectPerReceipt(t, pool, accepted)
					if t.Failed() {
						t.FailNow()
					}
				}
				lost := countRows(t, pool, "status <> 'COMPLETED'")
				doubled := effectCount(t, pool, "message_id IN (SELECT message_id FROM effects GROUP BY message_id HAVING count(*) > 1)")
				t.Logf("crash loop %s MessagesPerTx=%d: kills=%d receipts=%d lost=%d doubled=%d", point, perTx, rounds, accepted, lost, doubled)
			})
		}
	}
}

func startLoopChild(t *testing.T, dsn, point string, perTx int) *childtest.Child {
	t.Helper()
	return startChild(t, dsn, "loop", 0, envChildPoint+"="+point, envChildPerTx+"="+strconv.Itoa(perTx))
}

// childOrderedWorker runs a worker that stops right before the first COMMIT,
// after the promotion of the next receipt of the key it completes: it then
// holds the key's lock, and waits there to be killed.
func childOrderedWorker(t *testing.T, pool *pgxpool.Pool) {
	w := newWorker(t, pool, registry(t, orderedHandler(t, nil)),
		inbox.WorkerConfig{Concurrency: 2, Lease: childLease, PollInterval: 20 * time.Millisecond})
	var armed atomic.Bool
	armed.Store(true)
	inbox.SetTestHooks(w, nil, func(id inbox.ID) {
		if armed.CompareAndSwap(true, false) {
			childtest.Mark("committing %s", id)
			blockUntilKilled()
		}
	})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	blockUntilKilled()
}

// TestCrashOfTheWorkerHoldingAKeysHead SIGKILLs a worker process that
// completed the head of a key and ran its handler, right before the round
// trip that promotes the key's next receipt and commits: an accept of the
// key meanwhile queues behind the head (the head's completion is not
// committed), and nothing waits for the killed process; the head is
// recovered and runs again first, and the key is handled in accept order,
// each message once.
func TestCrashOfTheWorkerHoldingAKeysHead(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	pool, dsn := newPool(t)
	c := newClient(t, pool, inbox.Config{})
	w := newWorker(t, pool, orderedRegistry(t, pool, nil), inbox.WorkerConfig{Lease: childLease})
	ids := orderedIDs(t, c, "k", 1, 3)

	ch := startChild(t, dsn, "ordered", 0)
	idText, ok := strings.CutPrefix(ch.Marker(t), "committing ")
	is.True(ok)
	is.Equal(idText, ids[0].String())
	accepted := make(chan error, 1)
	go func() {
		_, err := c.Accept(ctx, orderedMsg(inbox.Tenant("t1"), "k", 4))
		accepted <- err
	}()
	// The key's lock is taken only in the commit's round trip: an accept
	// does not wait for a handler transaction.
	select {
	case err := <-accepted:
		is.NoErr(err)
	case <-time.After(15 * time.Second):
		t.Fatal("an accept of the key waited for a handler transaction")
	}
	is.Equal(countRows(t, pool, "blocked"), 3) // behind the head, whose completion is not committed
	ch.Kill(t)
	is.Equal(stateOf(t, pool, ids[0]).Status, "PROCESSING")
	is.Equal(countRows(t, pool, "blocked"), 3) // nothing promoted

	recoverAll(t, pool, w)
	for {
		n, err := w.Drain(ctx)
		is.NoErr(err)
		if n == 0 {
			break
		}
	}
	is.Equal(handledOrder(t, pool)["k"], []int{1, 2, 3, 4})
	is.Equal(countRows(t, pool, "status = 'COMPLETED'"), 4)
	is.Equal(stateOf(t, pool, ids[0]).Attempts, 2)
}
