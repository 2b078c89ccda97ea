//go:build unix

package historycheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/internal/childtest"
	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/internal/testkit"
)

// The runtime history's worker settings: a lease shorter than the slow
// handlers, so a handler outlives its lease while its transaction holds the
// receipt, and hung handlers that outlive the server's timeouts
// (HandlerTimeout plus one second).
const (
	rtConsumer       = "rt.c"
	rtLease          = 300 * time.Millisecond
	rtHandlerTimeout = 800 * time.Millisecond
	rtMaxAttempts    = 3
)

// rtEvent is a worker child's marker line: a handler invocation's start,
// printed before its business write, or its end, printed before it returns.
type rtEvent struct {
	End     bool
	Tag     string // unique per invocation
	Receipt string
	Attempt int
	Kind    string // ok, error, slow or hang: what the handler was told to do
	Err     string // the error the handler returned
	Started int64  // the start's tick of the history's clock (rtClock)
}

// rtCall is one handler invocation as the parent saw it.
type rtCall struct {
	Proc    string
	Receipt string
	Attempt int
	Kind    string
	Ended   bool // its end was printed: the handler returned
	Err     string
	Started int64
}

// rtClock orders handler invocations across processes: a sequence, whose
// nextval takes effect at once whatever becomes of the transaction. A
// handler takes a tick when it starts and, when it is about to return
// without an error, another in its business row ("ended"): a receipt whose
// ordering key has an earlier receipt must start after that receipt's
// committed invocation ended.
const rtClock = "runtime_clock"

// TestWorkerRuntimeHistory runs the real Worker runtime (claims, batches
// with savepoints, heartbeats, recovery, retries, the hung-handler
// watchdog) in child processes killed with SIGKILL at random moments,
// while operators accept, redeliver, replay and requeue through a proxy
// whose connections are cut and whose sessions are killed. Every handler
// invocation is recorded; after a final drain without faults the history
// is checked against the invariants: an acknowledged accept is never lost,
// one receipt per identity, exactly one committed handler per COMPLETED
// receipt and none for any other, never one whose handler failed or hung,
// and never one attempt of a receipt run by two processes. Two messages in
// three carry an ordering key (two keys per scope), and each key's order is
// checked too: no handler of a receipt starts before every earlier receipt
// of its key has completed (its committed handler ended), and no receipt is
// left BLOCKED without an earlier one of its key still holding it.
func TestWorkerRuntimeHistory(t *testing.T) {
	ctx := t.Context()
	pool, direct, proxy := proxiedPools(t)
	if _, err := direct.Exec(ctx, `CREATE TABLE runtime_effects (receipt_id uuid NOT NULL, tag text PRIMARY KEY, attempt int NOT NULL,
		started bigint NOT NULL, ended bigint);
		CREATE SEQUENCE `+rtClock); err != nil {
		t.Fatal(err)
	}
	client, err := inbox.NewClient(pool, inbox.Config{MaxAttempts: rtMaxAttempts})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
	if err != nil {
		t.Fatal(err)
	}
	rt := &runtimeHistory{direct: direct, proxy: proxy, client: client, view: admin.Operator(),
		calls: map[string]*rtCall{}, acked: map[string]inbox.ID{}, accepted: map[string]bool{}, requeued: map[string]bool{}, counts: map[string]int{}}

	runCtx, stop := context.WithTimeout(ctx, time.Duration(historySeconds())*time.Second)
	defer stop()
	var wg sync.WaitGroup
	var procKills atomic.Int64
	for w := range 2 {
		wg.Go(func() { procKills.Add(rt.runWorkerChildren(t, runCtx, w)) })
	}
	for o := range 2 {
		wg.Go(func() { rt.operate(runCtx, uint64(o)) })
	}
	var kills, cuts atomic.Int64
	wg.Go(func() { faults(runCtx, direct, proxy, &kills, &cuts) })
	wg.Wait()

	drained := rt.finalDrain(t, ctx)
	rt.check(t, ctx)
	t.Logf("worker runtime history: %v; %d worker processes killed, %d sessions killed, %d cuts of every client connection; final drain %s; 0 anomalies",
		rt.counts, procKills.Load(), kills.Load(), cuts.Load(), drained.Round(time.Millisecond))
	if procKills.Load() == 0 || kills.Load() == 0 || cuts.Load() == 0 {
		t.Errorf("%d worker processes killed, %d sessions killed, %d connection cuts: the run did not check every fault",
			procKills.Load(), kills.Load(), cuts.Load())
	}
}

// runtimeHistory is what the runtime history's clients and checks share.
type runtimeHistory struct {
	direct *pgxpool.Pool
	proxy  *faultproxy.Proxy
	client *inbox.Client
	view   *inbox.AdminView

	mu       sync.Mutex
	calls    map[string]*rtCall  // by tag
	acked    map[string]inbox.ID // message ID -> receipt ID, from an accept or redelivery that returned
	accepted map[string]bool     // messages a call said it inserted (Accepted): one call at most may
	requeued map[string]bool     // receipts requeued: their attempts count again from 1
	counts   map[string]int
	faults   []string // anomalies found while running
	messages int      // messages made so far
	sent     []int    // the messages whose first accept returned, for redeliveries
}

func (rt *runtimeHistory) count(what string) {
	rt.mu.Lock()
	rt.counts[what]++
	rt.mu.Unlock()
}

// rtMessage is message n: of one of four tenants, and, two in three, with
// one of two ordering keys of its tenant.
func rtMessage(n int) inbox.Message {
	m := inbox.Message{
		Identity:  inbox.Identity{Scope: inbox.Tenant(fmt.Sprintf("t%d", n%4)), Source: "rt", Consumer: rtConsumer, MessageID: fmt.Sprintf("m%d", n)},
		EventType: "e", SchemaVersion: 1, Payload: map[string]int{"n": n},
	}
	if n%3 != 0 {
		m.OrderingKey = fmt.Sprintf("k%d", n/4%2)
	}
	return m
}

// operate accepts new messages, redelivers those whose first accept
// returned, replays COMPLETED
// receipts and requeues DEAD ones until ctx ends.
func (rt *runtimeHistory) operate(ctx context.Context, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	bg := context.Background() // a call is not cut short by the run's end
	for testkit.Pace(ctx, time.Duration(5+rng.IntN(20))*time.Millisecond) {
		switch p := rng.IntN(100); {
		case p < 55:
			rt.mu.Lock()
			n := rt.messages
			rt.messages++
			rt.mu.Unlock()
			res, err := rt.client.Accept(bg, rtMessage(n))
			rt.mu.Lock()
			rt.sent = append(rt.sent, n)
			switch {
			case err != nil:
				rt.counts["accept unknown"]++
			case res.Outcome != inbox.Accepted:
				rt.faults = append(rt.faults, fmt.Sprintf("the first accept of m%d said %s", n, res.Outcome))
			default:
				rt.acked[fmt.Sprintf("m%d", n)] = res.ID
				rt.accepted[fmt.Sprintf("m%d", n)] = true
				rt.counts["accept ok"]++
			}
			rt.mu.Unlock()
		case p < 85:
			rt.mu.Lock()
			if len(rt.sent) == 0 {
				rt.mu.Unlock()
				continue
			}
			n := rt.sent[rng.IntN(len(rt.sent))]
			rt.mu.Unlock()
			msg := rtMessage(n)
			res, err := rt.client.Accept(bg, msg)
			if err != nil {
				rt.count("redeliver unknown")
				continue
			}
			rt.mu.Lock()
			// After a first accept whose outcome is unknown, two redeliveries
			// may race: the one that inserts says Accepted, and may return
			// after the other's Duplicate of its row. Every call must name
			// one receipt, and one call at most may have inserted it.
			id, ok := rt.acked[msg.MessageID]
			switch {
			case !ok:
				rt.acked[msg.MessageID] = res.ID // its first accept failed
			case res.ID != id:
				rt.faults = append(rt.faults, fmt.Sprintf("a redelivery of %s, acknowledged as %s, said %s %s", msg.MessageID, id, res.Outcome, res.ID))
			}
			if res.Outcome != inbox.Duplicate {
				if rt.accepted[msg.MessageID] {
					rt.faults = append(rt.faults, fmt.Sprintf("a redelivery of %s said %s %s after another call had inserted it", msg.MessageID, res.Outcome, res.ID))
				}
				rt.accepted[msg.MessageID] = true
			}
			rt.counts["redeliver ok"]++
			rt.mu.Unlock()
		default:
			rt.adminChange(bg, rng)
		}
	}
}

// adminChange replays a COMPLETED receipt or requeues a DEAD one, at the
// version just read.
func (rt *runtimeHistory) adminChange(ctx context.Context, rng *rand.Rand) {
	status := "COMPLETED"
	if rng.IntN(2) == 0 {
		status = "DEAD"
	}
	var id inbox.ID
	var version int64
	if err := rt.direct.QueryRow(ctx, `SELECT id, version FROM pginbox_receipts_live WHERE status = $1 ORDER BY random() LIMIT 1`,
		status).Scan(&id, &version); err != nil {
		return
	}
	p := inbox.ChangeParams{ExpectedVersion: version, Actor: "history", Reason: "runtime history"}
	var err error
	if status == "DEAD" {
		rt.mu.Lock()
		rt.requeued[id.String()] = true // before the call: it may commit and still fail
		rt.mu.Unlock()
		_, err = rt.view.Requeue(ctx, id, p)
		rt.count(outcome("requeue", err))
		return
	}
	_, err = rt.view.Replay(ctx, id, p)
	rt.count(outcome("replay", err))
}

func outcome(op string, err error) string {
	var conflict *inbox.VersionConflictError
	switch {
	case err == nil:
		return op + " ok"
	case errors.As(err, &conflict):
		return op + " conflict"
	default:
		return op + " failed"
	}
}

// runWorkerChildren runs worker w in child processes until ctx ends, each
// killed with SIGKILL 0.3 to 2.5 s after its start, and records the
// handler invocations they report. It returns the kills.
func (rt *runtimeHistory) runWorkerChildren(t *testing.T, ctx context.Context, w int) int64 {
	var kills int64
	for gen := 0; ctx.Err() == nil; gen++ {
		proc := fmt.Sprintf("w%d-%d", w, gen)
		child := childtest.Start(t, "TestWorkerRuntimeChild",
			"RUNTIME_CHILD=1",
			"RUNTIME_DSN="+rt.direct.Config().ConnString(),
			fmt.Sprintf("RUNTIME_PROXY_PORT=%d", rt.proxy.Port()),
			"RUNTIME_PROC="+proc,
			fmt.Sprintf("RUNTIME_PER_TX=%d", []int{1, 4}[gen%2]),
		)
		read := func() {
			for _, m := range child.PendingMarkers() {
				var ev rtEvent
				if err := json.Unmarshal([]byte(m), &ev); err != nil {
					t.Errorf("worker child %s: marker %q: %v", proc, m, err)
					continue
				}
				rt.mu.Lock()
				if ev.End {
					if c := rt.calls[ev.Tag]; c != nil {
						c.Ended, c.Err = true, ev.Err
					}
				} else {
					rt.calls[ev.Tag] = &rtCall{Proc: proc, Receipt: ev.Receipt, Attempt: ev.Attempt, Kind: ev.Kind, Started: ev.Started}
					rt.counts["handler "+ev.Kind]++
				}
				rt.mu.Unlock()
			}
		}
		if watchChild(t, ctx, child, time.Duration(300+rand.IntN(2200))*time.Millisecond, read) {
			kills++
		} else if ctx.Err() == nil {
			t.Errorf("worker child %s ended by itself (%v):\n%s", proc, child.Err(), child.Output())
			return kills
		}
	}
	return kills
}

// TestWorkerRuntimeChild is a worker process of TestWorkerRuntimeHistory:
// a Worker through the proxy whose handler writes one business row and
// then, at random, returns, fails, runs past its lease, or hangs past the
// server's timeouts ignoring its context.
func TestWorkerRuntimeChild(t *testing.T) {
	if os.Getenv("RUNTIME_CHILD") == "" {
		t.Skip("only runs as a child process of TestWorkerRuntimeHistory")
	}
	childtest.ExitWithParent()
	pool := childPool(t, os.Getenv("RUNTIME_DSN"), os.Getenv("RUNTIME_PROXY_PORT"), 8)
	proc := os.Getenv("RUNTIME_PROC")
	perTx, _ := strconv.Atoi(os.Getenv("RUNTIME_PER_TX"))
	var n atomic.Int64
	fn := func(ctx context.Context, m *handler.Msg) error {
		ev := rtEvent{Tag: fmt.Sprintf("%s-%d", proc, n.Add(1)), Receipt: m.ReceiptID.String(), Attempt: m.Attempt}
		switch p := rand.IntN(100); {
		case p < 65:
			ev.Kind = "ok"
		case p < 85:
			ev.Kind = "error"
		case p < 95:
			ev.Kind = "slow"
		default:
			ev.Kind = "hang"
		}
		err := rtHandle(ctx, m, ev.Tag, ev.Kind, func(started int64) {
			ev.Started = started
			mark(ev)
		})
		ev.End = true
		ev.Started = 0
		if err != nil {
			ev.Err = err.Error()
		}
		mark(ev)
		return err
	}
	// Starting reads the schema and listens: a fault may end it, and the
	// process starts again, as a supervisor would restart it.
	for {
		w, err := runtimeWorker(pool, 3, perTx, fn)
		if err == nil {
			if err = w.Start(context.Background()); err == nil {
				select {} // until killed
			}
		}
		t.Logf("starting the worker: %v", err)
		time.Sleep(50 * time.Millisecond) // pacing the restarts, as a supervisor does; the child runs until killed
	}
}

// rtHandle takes the invocation's start tick and reports it to started,
// writes the business row and does what kind says; about to return without
// an error, it takes its end tick into the row.
func rtHandle(ctx context.Context, m *handler.Msg, tag, kind string, started func(int64)) error {
	var start int64
	if err := m.Tx.QueryRow(ctx, `SELECT nextval('`+rtClock+`')`).Scan(&start); err != nil {
		return err
	}
	started(start)
	if _, err := m.Tx.Exec(ctx, `INSERT INTO runtime_effects (receipt_id, tag, attempt, started) VALUES ($1, $2, $3, $4)`,
		m.ReceiptID, tag, m.Attempt, start); err != nil {
		return err
	}
	switch kind {
	case "error":
		return errors.New("the history's handler failed on purpose")
	case "slow": // past the lease, within the handler's deadline
		select {
		case <-time.After(rtLease + time.Duration(rand.IntN(int(rtHandlerTimeout-rtLease-100*time.Millisecond)))):
		case <-ctx.Done():
			return ctx.Err()
		}
	case "hang": // ignores its context past the server's timeouts: the hang is the point
		time.Sleep(rtHandlerTimeout + 1500*time.Millisecond)
		return nil // the watchdog ended the transaction: the commit fails
	}
	_, err := m.Tx.Exec(ctx, `UPDATE runtime_effects SET ended = nextval('`+rtClock+`') WHERE tag = $1`, tag)
	return err
}

func mark(ev rtEvent) {
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	childtest.Mark("%s", b)
}

// runtimeWorker is the history's Worker on pool, for handler fn.
func runtimeWorker(pool *pgxpool.Pool, concurrency, perTx int, fn handler.Func) (*inbox.Worker, error) {
	reg := handler.NewRegistry()
	if err := reg.Register(handler.Key{Consumer: rtConsumer, EventType: "e", SchemaVersion: 1}, fn); err != nil {
		return nil, err
	}
	return inbox.NewWorker(pool, reg, inbox.WorkerConfig{
		Concurrency: concurrency, MessagesPerTx: perTx, Lease: rtLease, HandlerTimeout: rtHandlerTimeout,
		PollInterval: 50 * time.Millisecond, RecoverInterval: 100 * time.Millisecond,
		Backoff: func(int) time.Duration { return 20 * time.Millisecond },
	})
}

// finalDrain runs a Worker without faults until every receipt is
// COMPLETED, DEAD or BLOCKED (behind a DEAD receipt of its key, which holds
// the key until an operator requeues or skips it; leases the killed workers
// held expire first), and returns how long it took.
func (rt *runtimeHistory) finalDrain(t *testing.T, ctx context.Context) time.Duration {
	start := time.Now()
	var n atomic.Int64
	w, err := runtimeWorker(rt.direct, 2, 1, func(ctx context.Context, m *handler.Msg) error {
		tag := fmt.Sprintf("final-%d", n.Add(1))
		return rtHandle(ctx, m, tag, "ok", func(started int64) {
			rt.mu.Lock()
			rt.calls[tag] = &rtCall{Proc: "final", Receipt: m.ReceiptID.String(), Attempt: m.Attempt, Kind: "ok", Ended: true, Started: started}
			rt.mu.Unlock()
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	var open int
	testkit.Eventually(t, time.Minute, func() bool {
		if err := rt.direct.QueryRow(ctx, `SELECT count(*) FROM pginbox_receipts_live WHERE status NOT IN ('COMPLETED', 'DEAD') AND NOT blocked`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		return open == 0
	}, "every receipt COMPLETED, DEAD or BLOCKED in the final drain; %v still open", testkit.Lazy(func() string { return fmt.Sprint(open) }))
	return time.Since(start)
}

// check reads every receipt and business row and checks the history's
// invariants; a failing history is kept as JSON.
func (rt *runtimeHistory) check(t *testing.T, ctx context.Context) {
	type receipt struct {
		ID, Message, Status string
		Attempts, Max       int
		Replay              bool
	}
	rows, err := rt.direct.Query(ctx, `SELECT id, message_id, CASE WHEN blocked THEN 'BLOCKED' ELSE status END, attempts, max_attempts, replay_of IS NOT NULL
		FROM pginbox_receipts_live`)
	if err != nil {
		t.Fatal(err)
	}
	receipts := map[string]receipt{}
	originals := map[string]int{}
	for rows.Next() {
		var r receipt
		var id inbox.ID
		if err := rows.Scan(&id, &r.Message, &r.Status, &r.Attempts, &r.Max, &r.Replay); err != nil {
			t.Fatal(err)
		}
		r.ID = id.String()
		receipts[r.ID] = r
		if !r.Replay {
			originals[r.Message]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	effects := map[string][]string{} // receipt -> tags
	starts := map[string][]int64{}   // receipt -> its invocations' start ticks
	ended := map[string]int64{}      // receipt -> its committed invocation's end tick
	rows, err = rt.direct.Query(ctx, `SELECT receipt_id, tag, started, coalesce(ended, 0) FROM runtime_effects`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id inbox.ID
		var tag string
		var start, end int64
		if err := rows.Scan(&id, &tag, &start, &end); err != nil {
			t.Fatal(err)
		}
		effects[id.String()] = append(effects[id.String()], tag)
		starts[id.String()] = append(starts[id.String()], start)
		ended[id.String()] = end
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	keys := rt.readKeys(t, ctx)

	rt.mu.Lock()
	defer rt.mu.Unlock()
	bad := slices.Clone(rt.faults)
	for msg, id := range rt.acked {
		if r, ok := receipts[id.String()]; !ok || r.Message != msg {
			bad = append(bad, fmt.Sprintf("%s was acknowledged as receipt %s, which is not in the database", msg, id))
		}
	}
	for msg, n := range originals {
		if n != 1 {
			bad = append(bad, fmt.Sprintf("%s has %d receipts", msg, n))
		}
	}
	for id, r := range receipts {
		tags := effects[id]
		switch {
		case r.Status == "COMPLETED" && len(tags) != 1:
			bad = append(bad, fmt.Sprintf("receipt %s is COMPLETED with %d business rows %v", id, len(tags), tags))
		case r.Status == "DEAD" && len(tags) != 0:
			bad = append(bad, fmt.Sprintf("receipt %s is DEAD with business rows %v", id, tags))
		case r.Status == "DEAD" && r.Attempts != r.Max:
			bad = append(bad, fmt.Sprintf("receipt %s is DEAD after %d of %d attempts", id, r.Attempts, r.Max))
		case r.Attempts > r.Max:
			bad = append(bad, fmt.Sprintf("receipt %s ran %d of %d attempts", id, r.Attempts, r.Max))
		}
		rt.counts["final "+r.Status]++
	}
	for id, tags := range effects {
		for _, tag := range tags {
			c := rt.calls[tag]
			switch {
			case c == nil || c.Receipt != id:
				bad = append(bad, fmt.Sprintf("business row %s of receipt %s comes from no invocation of that receipt", tag, id))
			case c.Kind == "error" || c.Kind == "hang" || (c.Ended && c.Err != ""):
				bad = append(bad, fmt.Sprintf("business row %s of receipt %s committed although its handler (%s) ended with %q", tag, id, c.Kind, c.Err))
			}
		}
	}
	// An attempt is one claim: two processes never run the same attempt of
	// a receipt (a batch may run it again in the same process). A requeue
	// counts the attempts again.
	ran := map[string]string{}
	for _, c := range rt.calls {
		if rt.requeued[c.Receipt] {
			continue
		}
		k := fmt.Sprintf("%s/%d", c.Receipt, c.Attempt)
		if p, ok := ran[k]; ok && p != c.Proc {
			bad = append(bad, fmt.Sprintf("attempt %d of receipt %s ran in %s and in %s", c.Attempt, c.Receipt, p, c.Proc))
		}
		ran[k] = c.Proc
	}
	for _, c := range rt.calls {
		if c.Started != 0 {
			starts[c.Receipt] = append(starts[c.Receipt], c.Started)
		}
	}
	bad = append(bad, checkKeyOrder(keys, starts, ended)...)
	for _, group := range keys {
		rt.counts["keyed receipts"] += len(group)
	}
	rt.counts["ordering keys"] = len(keys)
	rt.counts["receipts"] = len(receipts)
	rt.counts["invocations"] = len(rt.calls)
	if len(bad) == 0 {
		return
	}
	dir := os.Getenv("HISTORY_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("worker-runtime-history-%d.json", time.Now().UnixNano()))
	b, err := json.MarshalIndent(map[string]any{"anomalies": bad, "calls": rt.calls, "acked": rt.acked, "receipts": receipts, "effects": effects, "keys": keys}, "", " ")
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Logf("writing the history: %v", err)
	}
	if len(bad) > 20 {
		bad = append(bad[:20], fmt.Sprintf("... and %d more", len(bad)-20))
	}
	t.Fatalf("%d anomalies (history kept in %s):\n%s", len(bad), path, fmt.Sprint(bad))
}

// rtKeyed is a receipt with an ordering key as the history ended.
type rtKeyed struct {
	ID     string
	Seq    int64
	Status string // the work row's while there is one (BLOCKED included)
	Holds  bool   // its work row carries the key: unfinished, or DEAD and not skipped
}

// readKeys returns the receipts with an ordering key, by key (consumer,
// scope and key), in the key's order.
func (rt *runtimeHistory) readKeys(t *testing.T, ctx context.Context) map[string][]rtKeyed {
	rows, err := rt.direct.Query(ctx, `SELECT r.id, concat_ws('/', r.consumer, r.scope_kind, r.scope_id, r.ordering_key), r.ordering_seq,
			coalesce(w.status, r.status), coalesce(w.ordering_key IS NOT NULL, false)
		FROM pginbox_receipts r
		LEFT JOIN pginbox_work w ON w.receipt_id = r.id AND w.scope_kind = r.scope_kind AND w.scope_id = r.scope_id
		WHERE r.ordering_key IS NOT NULL
		ORDER BY r.ordering_seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	keys := map[string][]rtKeyed{}
	for rows.Next() {
		var id inbox.ID
		var k string
		var r rtKeyed
		if err := rows.Scan(&id, &k, &r.Seq, &r.Status, &r.Holds); err != nil {
			t.Fatal(err)
		}
		r.ID = id.String()
		keys[k] = append(keys[k], r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// checkKeyOrder checks each ordering key's order: a handler of a receipt
// starts only once every earlier receipt of its key is finished: it
// completed (its committed handler ended before, on the history's clock) or
// was skipped. An earlier receipt that still holds the key at the end
// (DEAD, not skipped: the drain ran the others) never finished, so no
// later receipt of the key may have started at all. And no key is stuck: a
// receipt left BLOCKED has an earlier one of its key still holding it.
// starts has every start tick seen per receipt, ended the end tick of each
// receipt's committed invocation.
func checkKeyOrder(keys map[string][]rtKeyed, starts map[string][]int64, ended map[string]int64) []string {
	var bad []string
	for k, group := range keys {
		for j, b := range group {
			held := false
			for _, a := range group[:j] {
				held = held || a.Holds
				for _, s := range starts[b.ID] {
					if a.Holds {
						bad = append(bad, fmt.Sprintf("key %s: the handler of receipt %s (#%d) started (tick %d) while receipt %s (#%d) still holds the key (%s)",
							k, b.ID, b.Seq, s, a.ID, a.Seq, a.Status))
						break
					}
					if e := ended[a.ID]; e != 0 && s < e {
						bad = append(bad, fmt.Sprintf("key %s: the handler of receipt %s (#%d) started (tick %d) before the completing handler of receipt %s (#%d) ended (tick %d)",
							k, b.ID, b.Seq, s, a.ID, a.Seq, e))
						break
					}
				}
			}
			if b.Status == "BLOCKED" && !held {
				bad = append(bad, fmt.Sprintf("key %s: receipt %s (#%d) is BLOCKED with no earlier receipt of its key holding it", k, b.ID, b.Seq))
			}
		}
	}
	return bad
}

// The key order check reports what a claim ignoring the keys' heads would
// show, and nothing in a history that kept the order.
func TestKeyOrderCheck(t *testing.T) {
	done := func(id string, seq int64) rtKeyed { return rtKeyed{ID: id, Seq: seq, Status: "COMPLETED"} }
	cases := []struct {
		name   string
		keys   []rtKeyed
		starts map[string][]int64
		ended  map[string]int64
		bad    int
	}{
		{"in order", []rtKeyed{done("a", 1), done("b", 2)},
			map[string][]int64{"a": {1, 3}, "b": {5}}, map[string]int64{"a": 4, "b": 6}, 0},
		{"the second started before the first ended", []rtKeyed{done("a", 1), done("b", 2)},
			map[string][]int64{"a": {1}, "b": {2}}, map[string]int64{"a": 3, "b": 4}, 1},
		{"the second started before the first's retry ended", []rtKeyed{done("a", 1), done("b", 2)},
			map[string][]int64{"a": {1, 4}, "b": {3, 7}}, map[string]int64{"a": 5, "b": 8}, 1},
		{"the second ran behind a DEAD head", []rtKeyed{{ID: "a", Seq: 1, Status: "DEAD", Holds: true}, done("b", 2)},
			map[string][]int64{"a": {1}, "b": {3}}, map[string]int64{"b": 4}, 1},
		{"BLOCKED behind a DEAD head", []rtKeyed{{ID: "a", Seq: 1, Status: "DEAD", Holds: true}, {ID: "b", Seq: 2, Status: "BLOCKED"}},
			map[string][]int64{"a": {1}}, map[string]int64{}, 0},
		{"BLOCKED behind a completed head", []rtKeyed{done("a", 1), {ID: "b", Seq: 2, Status: "BLOCKED"}},
			map[string][]int64{"a": {1}}, map[string]int64{"a": 2}, 1},
		{"after a skipped head", []rtKeyed{{ID: "a", Seq: 1, Status: "DEAD"}, done("b", 2)},
			map[string][]int64{"a": {1}, "b": {3}}, map[string]int64{"b": 4}, 0},
	}
	for _, c := range cases {
		if got := checkKeyOrder(map[string][]rtKeyed{"k": c.keys}, c.starts, c.ended); len(got) != c.bad {
			t.Errorf("%s: %d anomalies %q, want %d", c.name, len(got), got, c.bad)
		}
	}
}
