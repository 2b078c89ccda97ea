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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inboxtype"
	"github.com/pginbox/pginbox/internal/faultproxy"
	"github.com/pginbox/pginbox/internal/pgcluster"
	"github.com/pginbox/pginbox/internal/pipetx"
	"github.com/pginbox/pginbox/internal/testkit"
	"github.com/pginbox/pginbox/schema"
)

// wInput is an operation of the worker history on one receipt: a claim of
// its consumer under a token, a failure recorded under it, a handler
// transaction completing it under it (with one business row), a recovery of
// its consumer's expired leases, an operator's requeue at an expected
// version, a read, a redelivery of its message (a duplicate Accept), or the
// state read between epochs (status, version, token and business rows).
type wInput struct {
	Op       string // claim, fail, complete, recover, requeue, get, accept
	Receipt  int
	Token    string
	Expected int64
}

// wOutput: Result is ok, none (a claim that took nothing), lost (a failure
// or completion whose token no longer matched), rolled_back (a handler
// transaction that rolled back), accepted (a redelivery stored as new),
// conflict, wrong_state or unknown (the call failed: it may have committed);
// Recovered lists the receipts a recovery returned (none or its own); Status
// and Version are a read's (a redelivery's: the status Accept reported).
type wOutput struct {
	Result    string
	Recovered []int
	Status    string
	Version   int64
	Token     string // the state read between epochs
	Effects   int    // the state read between epochs
	Purged    bool   // the state read between epochs
}

// wReceipt is one receipt's state: Effects counts the business rows its
// handler transactions committed.
type wReceipt struct {
	Status  string
	Version int64
	Token   string
	Effects int
	Purged  bool // a purge dropped its payload
	// Unflushed: the last change was a claim, which commits without
	// waiting for its WAL flush (synchronous_commit off, as the worker's
	// claims): a server crash may undo it, back to Before. Any later change
	// of the receipt commits durably and so flushes the claim too.
	Unflushed bool
	Before    wCore
}

// wCore is what a lost claim leaves: the state before it.
type wCore struct {
	Status  string
	Version int64
	Token   string
}

type wState []wReceipt

func (s wState) with(i int, r wReceipt) wState {
	n := slices.Clone(s)
	n[i] = r
	return n
}

func workerModel(initial wState) porcupine.Model {
	nm := &porcupine.NondeterministicModel{
		// Every operation touches one receipt: check each receipt's
		// history apart.
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			parts := make([][]porcupine.Operation, len(initial))
			for _, op := range history {
				i := op.Input.(wInput).Receipt
				parts[i] = append(parts[i], op)
			}
			return parts
		},
		Init: func() []any { return []any{slices.Clone(initial)} },
		Step: func(state, input, output any) []any {
			s := state.(wState)
			in, out := input.(wInput), output.(wOutput)
			r := s[in.Receipt]
			unknown := out.Result == "unknown"
			var next []any
			switch in.Op {
			case "state":
				if out.Status == r.Status && out.Version == r.Version && out.Token == r.Token && out.Effects == r.Effects && out.Purged == r.Purged {
					next = append(next, s)
				}
			case "accept":
				if r.Status == "" {
					// The first accept stores the receipt, due.
					if out.Result == "accepted" || unknown {
						next = append(next, s.with(in.Receipt, wReceipt{Status: "PENDING", Version: 1}))
					}
					if unknown {
						next = append(next, s)
					}
					break
				}
				// A redelivery changes nothing and reports the live status.
				if (out.Result == "ok" && out.Status == r.Status) || unknown {
					next = append(next, s)
				}
			case "get":
				if out.Status == r.Status && out.Version == r.Version {
					next = append(next, s)
				}
			case "claim":
				// SKIP LOCKED: a claim may take nothing at any time.
				if out.Result == "none" || unknown {
					next = append(next, s)
				}
				if (out.Result == "ok" || unknown) && (r.Status == "PENDING" || r.Status == "RETRYABLE") {
					next = append(next, s.with(in.Receipt, wReceipt{Status: "PROCESSING", Version: r.Version + 1, Token: in.Token, Effects: r.Effects,
						Unflushed: true, Before: wCore{r.Status, r.Version, r.Token}}))
				}
			case "fail":
				match := r.Status == "PROCESSING" && r.Token == in.Token
				if (out.Result == "ok" || unknown) && match {
					next = append(next, s.with(in.Receipt, wReceipt{Status: "DEAD", Version: r.Version + 1, Token: "", Effects: r.Effects}))
				}
				if (out.Result == "lost" && !match) || unknown {
					next = append(next, s)
				}
			case "complete":
				// The business row and the completion commit together or
				// not at all, and only under the current token.
				match := r.Status == "PROCESSING" && r.Token == in.Token
				if (out.Result == "ok" || unknown) && match {
					next = append(next, s.with(in.Receipt, wReceipt{Status: "COMPLETED", Version: r.Version + 1, Token: "", Effects: r.Effects + 1}))
				}
				if (out.Result == "lost" && !match) || out.Result == "rolled_back" || unknown {
					next = append(next, s)
				}
			case "purge":
				// An operator's purge of every scope, cutoff now: it may drop
				// a COMPLETED receipt's payload (once: a version), and it
				// touches nothing else. It may also pass a receipt by (a
				// lock held, a completion at the cutoff).
				next = append(next, s)
				if (out.Result == "ok" || unknown) && r.Status == "COMPLETED" && !r.Purged {
					next = append(next, s.with(in.Receipt, wReceipt{Status: r.Status, Version: r.Version + 1, Effects: r.Effects, Purged: true}))
				}
			case "crash":
				// The server stopped at once and started again: what it
				// had flushed survives; an unflushed claim may be lost.
				next = append(next, s.with(in.Receipt, wReceipt{Status: r.Status, Version: r.Version, Token: r.Token, Effects: r.Effects, Purged: r.Purged}))
				if r.Unflushed {
					next = append(next, s.with(in.Receipt, wReceipt{Status: r.Before.Status, Version: r.Before.Version, Token: r.Before.Token, Effects: r.Effects}))
				}
			case "recover":
				// Leases expire with time the model does not see: a recovery
				// of the receipt's consumer may take it when PROCESSING.
				if (out.Result == "ok" && len(out.Recovered) == 0) || unknown {
					next = append(next, s)
				}
				if (len(out.Recovered) == 1 || unknown) && r.Status == "PROCESSING" {
					next = append(next, s.with(in.Receipt, wReceipt{Status: "RETRYABLE", Version: r.Version + 1, Token: "", Effects: r.Effects}))
				}
			case "requeue":
				requeued := s.with(in.Receipt, wReceipt{Status: "PENDING", Version: r.Version + 1, Token: "", Effects: r.Effects})
				switch r.Status {
				case "PROCESSING":
					// Refused while its lease runs or a transaction holds
					// it; taken once the lease expired (time the model does
					// not see).
					if out.Result == "wrong_state" || unknown {
						next = append(next, s)
					}
					if (out.Result == "ok" || unknown) && in.Expected == r.Version {
						next = append(next, requeued)
					}
					if out.Result == "conflict" && in.Expected != r.Version {
						next = append(next, s)
					}
				default:
					switch {
					case in.Expected != r.Version:
						if out.Result == "conflict" || unknown {
							next = append(next, s)
						}
					case r.Status == "DEAD" || r.Status == "RETRYABLE":
						if out.Result == "ok" || unknown {
							next = append(next, requeued)
						}
						if unknown {
							next = append(next, s)
						}
					default:
						if out.Result == "wrong_state" || unknown {
							next = append(next, s)
						}
					}
				}
			}
			return next
		},
		Equal: func(a, b any) bool { return slices.Equal(a.(wState), b.(wState)) },
		DescribeOperation: func(input, output any) string {
			in, out := input.(wInput), output.(wOutput)
			return fmt.Sprintf("%s(%d, %.8s, v%d) -> %s %v %s v%d", in.Op, in.Receipt, in.Token, in.Expected, out.Result, out.Recovered, out.Status, out.Version)
		},
	}
	return nm.ToModel()
}

// historyEpoch is the length of one checked part of a worker history. An
// operation whose outcome is unknown (its session was killed) may take
// effect at any time after its call, so in one long history it overlaps
// everything after it and the check grows out of reach: a 120-second history
// with about 800 of them ran out of its 5 minutes. The run is cut into
// epochs instead; between two, every client stops, the server finishes what
// it was running, and the state read then ends one epoch's history and
// starts the next.
const historyEpoch = 5 * time.Second

// TestWorkerHistory records a history of worker statements (claims, failures
// recorded under their tokens, handler transactions that complete under their
// tokens and write a business row or roll back, recoveries of leases that
// expire after 300 ms, each consumer in turn) and operators' requeues, reads
// and redeliveries on three receipts, while a fault injector kills random
// client sessions or cuts every client connection (a TCP proxy between the
// clients and the server), and checks it for linearizability, epoch by epoch
// (historyEpoch): the fencing by token and the expected versions hold under
// faults, a receipt has exactly one business row per committed completion,
// and a redelivery changes nothing. HISTORY_SECONDS sets the run's length
// (default 5).
func TestWorkerHistory(t *testing.T) {
	pool, direct, proxy := proxiedPools(t)
	h := checkWorkerHistory(t, pool, direct, proxy, nil)
	if h.kills.Load() == 0 || h.cuts.Load() == 0 {
		t.Errorf("%d sessions killed and %d connection cuts: the run did not check both faults", h.kills.Load(), h.cuts.Load())
	}
}

// TestWorkerHistoryServerCrash is TestWorkerHistory on a server of its own
// that also crashes once per epoch (every process stopped at once, then
// started again: crash recovery). The claims commit without waiting for
// their WAL flush, as the worker's do, so a crash may undo a claim that
// returned; the model allows exactly that and nothing else: every other
// change that returned survives.
func TestWorkerHistoryServerCrash(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("a server of the test's own is needed: %v", err)
		}
		t.Skipf("skipped: no PostgreSQL server binaries to start a server of the test's own (%v)", err)
	}
	// Commits write their WAL before they return (synchronous_commit on);
	// fsync stays off: the operating system keeps what was written through
	// a crash of the server's processes.
	server, err := pgcluster.Start(t.Context(), pgcluster.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := server.Stop(); err != nil {
			t.Error(err)
		}
	})
	dsn := server.ConnString("postgres")
	if err := schema.UpDSN(t.Context(), dsn); err != nil {
		t.Fatal(err)
	}
	pool, direct, proxy := proxiedPoolsOn(t, dsn)
	h := checkWorkerHistory(t, pool, direct, proxy, server)
	if p := h.crashErr.Load(); p != nil {
		t.Fatalf("crashing the server: %v", *p)
	}
	if h.crashes.Load() == 0 {
		t.Errorf("the server never crashed: the run did not check the fault")
	}
}

// checkWorkerHistory runs the worker history on the clients' pool, epoch by
// epoch, and fails t at the first epoch that is not linearizable.
func checkWorkerHistory(t *testing.T, pool, direct *pgxpool.Pool, proxy *faultproxy.Proxy, server *pgcluster.Cluster, configure ...func(*workerHistory)) *workerHistory {
	seconds := historySeconds()
	const receipts = 3
	ctx := t.Context()
	consumers := make([]string, receipts)
	for i := range consumers {
		consumers[i] = fmt.Sprintf("c%d", i)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE history_effects (receipt_id uuid NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	client, err := inbox.NewClient(pool, inbox.Config{MaxAttempts: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
	if err != nil {
		t.Fatal(err)
	}
	h := &workerHistory{pool: pool, direct: direct, proxy: proxy, q: db.New(pool), client: client, view: admin.Operator(), consumers: consumers,
		ids: make([]inbox.ID, receipts), msgs: make([]inbox.Message, receipts),
		index: map[inbox.ID]int{}, counts: map[string]int{}, start: time.Now(), server: server}
	for _, f := range configure {
		f(h)
	}
	for i := range receipts {
		h.next(i)
	}
	state := h.read(t, ctx)
	total := time.Duration(seconds) * time.Second
	ops, epochs := 0, 0
	var checking time.Duration
	for elapsed := time.Duration(0); elapsed < total; elapsed = time.Since(h.start) {
		epochs++
		history := h.run(ctx, min(historyEpoch, total-elapsed))
		h.quiesce(t, ctx)
		end := h.read(t, ctx)
		for _, r := range end {
			if r.Purged {
				h.mu.Lock()
				h.counts["state purged"]++
				h.mu.Unlock()
			}
		}
		// The state read after the epoch is its last operation: every
		// operation must linearize before it.
		at := h.now()
		for i := range receipts {
			history = append(history, porcupine.Operation{ClientId: 100, Input: wInput{Op: "state", Receipt: i},
				Call: at, Output: wOutput{Result: "ok", Status: end[i].Status, Version: end[i].Version, Token: end[i].Token, Effects: end[i].Effects, Purged: end[i].Purged}, Return: at + 1})
		}
		for k := range history {
			if history[k].Output.(wOutput).Result == "unknown" {
				history[k].Return = at - 1 // its session ended before the read
			}
		}
		ops += len(history)
		model := workerModel(state)
		checkStart := time.Now()
		res, info := porcupine.CheckOperationsVerbose(model, history, 5*time.Minute)
		checking += time.Since(checkStart)
		if res != porcupine.Ok {
			dir := os.Getenv("HISTORY_DIR")
			if dir == "" {
				dir = os.TempDir()
			}
			path := filepath.Join(dir, fmt.Sprintf("worker-history-%d-epoch-%d.html", h.start.UnixNano(), epochs))
			if err := porcupine.VisualizePath(model, info, path); err != nil {
				t.Logf("writing the history: %v", err)
			}
			writeHistory(t, strings.TrimSuffix(path, ".html")+".json", state, history)
			if res == porcupine.Unknown {
				t.Fatalf("epoch %d: the linearizability check ran out of time (%d operations): kept in %s", epochs, len(history), path)
			}
			t.Fatalf("epoch %d: the history is not linearizable (%s): kept in %s", epochs, res, path)
		}
		// A COMPLETED receipt changes no more: its consumer gets a new
		// message for the next epoch, which the operators accept first
		// while the workers claim.
		for i, r := range end {
			if r.Status == "COMPLETED" {
				h.next(i)
				end[i] = wReceipt{}
			}
		}
		state = end
	}
	t.Logf("worker history: %d operations in %d epochs %v, %d faults (%d sessions killed, %d cuts of every client connection, %d server crashes), 0 anomalies, Ok (checked in %s)",
		ops, epochs, h.counts, h.kills.Load()+h.cuts.Load()+h.crashes.Load(), h.kills.Load(), h.cuts.Load(), h.crashes.Load(), checking.Round(time.Millisecond))
	return h
}

// retry runs a call up to ten times: the pool may still hold connections
// whose sessions the fault injector ended or cut (after a cut, each of the
// clients' nine may be broken, and each failed call drops one).
func retry(read func() error) error {
	var err error
	for range 10 {
		if err = read(); err == nil {
			return nil
		}
	}
	return err
}

// writeHistory keeps a failing epoch's initial state and operations as JSON,
// beside porcupine's visualization.
func writeHistory(t *testing.T, path string, initial wState, history []porcupine.Operation) {
	b, err := json.MarshalIndent(map[string]any{"initial": initial, "operations": history}, "", " ")
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Logf("writing the history: %v", err)
	}
}

// workerHistory is what TestWorkerHistory's epochs share.
type workerHistory struct {
	pool   *pgxpool.Pool // the clients', through proxy
	direct *pgxpool.Pool // the checker's and the fault injector's
	proxy  *faultproxy.Proxy
	q      *db.Queries
	client *inbox.Client
	view   *inbox.AdminView
	ids    []inbox.ID // each history receipt's ID, zero until a call saw it (h.mu)
	// workerChildren, when set, runs the workers in child processes.
	workerChildren func(runCtx context.Context, workers int, seed uint64, record func(int, wInput, int64, wOutput, int64))
	msgs           []inbox.Message // and its message, for first accepts and redeliveries
	consumers      []string
	index          map[inbox.ID]int
	start          time.Time
	kills          atomic.Int64 // sessions killed
	cuts           atomic.Int64 // cuts of every client connection
	// server, when set, is the test's own server, crashed once per epoch.
	server   *pgcluster.Cluster
	crashes  atomic.Int64
	crashErr atomic.Pointer[error]

	mu       sync.Mutex
	counts   map[string]int
	messages int // messages made so far, for the next message's ID
}

func (h *workerHistory) now() int64 { return time.Since(h.start).Nanoseconds() }

// claim claims as the worker does on one server: one statement committed
// without waiting for its WAL flush.
func (h *workerHistory) claim(ctx context.Context, arg db.ReceiptClaimParams) ([]db.ReceiptClaimRow, error) {
	conn, err := h.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	return db.New(pipetx.Async{Conn: conn.Conn(), GenericPlan: true}).ReceiptClaim(ctx, arg)
}

// notSent reports that a call failed before any of it reached the server:
// it could not connect, or not one byte of it was written. pgx's
// SafeToRetry alone says more: it also covers "conn closed", the error pgx
// reports once it closed a connection whose read failed, after the request
// may have gone out (a COMMIT lost that way had committed:
// TestNotSentCallsDidNotCommit).
func notSent(err error) bool {
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	var retry interface {
		error
		SafeToRetry() bool
	}
	return errors.As(err, &retry) && retry.SafeToRetry() && retry.Error() != "conn closed"
}

// read returns each receipt's status, version and claim token.
func (h *workerHistory) read(t *testing.T, ctx context.Context) wState {
	t.Helper()
	s := make(wState, len(h.ids))
	for i, msg := range h.msgs {
		var token *inboxtype.ID
		var id inbox.ID
		err := retry(func() error {
			err := h.direct.QueryRow(ctx, `SELECT id, status, version, claim_token, payload_purged_at IS NOT NULL FROM pginbox_receipts_live
				WHERE source = $1 AND consumer = $2 AND message_id = $3`, msg.Source, msg.Consumer, msg.MessageID).
				Scan(&id, &s[i].Status, &s[i].Version, &token, &s[i].Purged)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // not accepted yet
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if s[i].Status == "" {
			continue
		}
		h.learn(id, i)
		if token != nil {
			s[i].Token = token.String()
		}
		err = retry(func() error {
			return h.direct.QueryRow(ctx, `SELECT count(*) FROM history_effects WHERE receipt_id = $1`, id).Scan(&s[i].Effects)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// next gives history receipt i a new message of its consumer, not accepted
// yet: the operators' first accept of it races the workers' claims.
func (h *workerHistory) next(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.messages++
	n := h.messages
	h.msgs[i] = inbox.Message{Identity: inbox.Identity{Scope: inbox.Global(), Source: "history", Consumer: h.consumers[i], MessageID: fmt.Sprint(n)},
		EventType: "e", SchemaVersion: 1, Payload: map[string]int{"n": n}}
	h.ids[i] = inbox.ID{}
}

// learn records that receipt i of this epoch has ID id (an accept, a claim
// or the state read saw it).
func (h *workerHistory) learn(id inbox.ID, i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids[i] = id
	h.index[id] = i
}

// id returns receipt i's ID, false while no call has seen it.
func (h *workerHistory) id(i int) (inbox.ID, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ids[i], h.ids[i] != inbox.ID{}
}

// slot returns the history receipt whose ID is id.
func (h *workerHistory) slot(id inbox.ID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.index[id]
}

// quiesce waits until no other session of the database runs a statement:
// what a killed session was running has then committed or rolled back.
func (h *workerHistory) quiesce(t *testing.T, ctx context.Context) {
	t.Helper()
	var active int
	testkit.Eventually(t, 30*time.Second, func() bool {
		err := retry(func() error {
			return h.direct.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
				AND state NOT IN ('idle')`).Scan(&active)
		})
		if err != nil {
			t.Fatal(err)
		}
		return active == 0
	}, "every session idle after the epoch; %v still busy", testkit.Lazy(func() string { return fmt.Sprint(active) }))
}

// complete runs a handler transaction on a claimed receipt: the completion
// under its token first, as the worker does, then one business row; it
// commits, or rolls back when rollback is set. It returns ok, lost (the
// completion found no receipt under the token), rolled_back (also when a
// statement before the commit failed) or unknown (the commit failed).
func (h *workerHistory) complete(ctx context.Context, id inbox.ID, token inbox.ID, rollback bool) string {
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return "rolled_back"
	}
	defer tx.Rollback(context.Background())
	rows, err := db.New(tx).ReceiptStart(ctx, db.ReceiptStartParams{Ids: []string{id.UUIDString()}, Tokens: []string{token.UUIDString()}})
	switch {
	case err != nil:
		return "rolled_back"
	case len(rows) == 0:
		return "lost"
	}
	if _, err := tx.Exec(ctx, `INSERT INTO history_effects (receipt_id) VALUES ($1)`, id); err != nil || rollback {
		return "rolled_back"
	}
	if err := tx.Commit(ctx); err != nil {
		return "unknown"
	}
	return "ok"
}

// run runs the clients and the fault injector for d and returns the history.
func (h *workerHistory) run(ctx context.Context, d time.Duration) []porcupine.Operation {
	const workers, operators = 3, 3
	receipts := len(h.ids)
	q, view := h.q, h.view
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(client int, in wInput, call int64, out wOutput, ret int64) {
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
		mu.Unlock()
		h.mu.Lock()
		h.counts[in.Op+" "+out.Result]++
		h.mu.Unlock()
	}
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var wg sync.WaitGroup
	seed := uint64(h.now())
	if h.workerChildren != nil {
		wg.Go(func() { h.workerChildren(runCtx, workers, seed, record) })
	} else {
		for c := range workers {
			wg.Go(func() { h.workerLoop(ctx, runCtx, c, seed, h.directCalls(c, record)) })
		}
	}
	wg.Go(func() {
		for n := 0; testkit.Pace(runCtx, 100*time.Millisecond/time.Duration(receipts)); n++ {
			i := n % receipts
			call := h.now()
			rows, err := q.ReceiptRecover(ctx, db.ReceiptRecoverParams{Consumers: []string{h.consumers[i]}, MaxCount: 100})
			if notSent(err) {
				continue
			}
			out := wOutput{Result: "ok", Recovered: []int{}}
			if err != nil {
				out.Result = "unknown"
			}
			for _, r := range rows {
				out.Recovered = append(out.Recovered, h.slot(r.ID))
			}
			record(workers, wInput{Op: "recover", Receipt: i}, call, out, h.now())
		}
	})
	for o := range operators {
		c := workers + 1 + o
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), seed))
			known := make([]int64, receipts)
			for runCtx.Err() == nil {
				i := rng.IntN(receipts)
				if rng.IntN(8) == 0 {
					call := h.now()
					res, err := h.client.Accept(ctx, h.msgs[i])
					if notSent(err) {
						continue
					}
					out := wOutput{Result: "ok", Status: string(res.Status)}
					switch {
					case err != nil:
						out = wOutput{Result: "unknown"} // a first accept may have committed
					case res.Outcome != inbox.Duplicate:
						out.Result = string(res.Outcome)
						h.learn(res.ID, i)
					default:
						h.learn(res.ID, i)
					}
					record(c, wInput{Op: "accept", Receipt: i}, call, out, h.now())
					continue
				}
				if rng.IntN(40) == 0 {
					call := h.now()
					_, err := view.Purge(ctx, inbox.PurgeParams{Before: time.Now()})
					if notSent(err) {
						continue
					}
					out := wOutput{Result: "ok"}
					if err != nil {
						out.Result = "unknown"
					}
					ret := h.now()
					for r := range receipts {
						record(c, wInput{Op: "purge", Receipt: r}, call, out, ret)
					}
					continue
				}
				if rng.IntN(2) == 0 {
					call := h.now()
					id, seen := h.id(i)
					if !seen {
						continue
					}
					r, err := view.Get(ctx, id)
					if err != nil {
						continue // a failed read changed nothing
					}
					known[i] = r.Version
					record(c, wInput{Op: "get", Receipt: i}, call, wOutput{Result: "ok", Status: string(r.Status), Version: r.Version}, h.now())
					continue
				}
				id, ok := h.id(i)
				if !ok {
					continue
				}
				in := wInput{Op: "requeue", Receipt: i, Expected: max(1, known[i]-int64(rng.IntN(2)))}
				call := h.now()
				_, err := view.Requeue(ctx, id, inbox.ChangeParams{ExpectedVersion: in.Expected, Actor: "history", Reason: "history check"})
				out := wOutput{Result: "ok"}
				var wrong *inbox.WrongStateError
				var conflict *inbox.VersionConflictError
				switch {
				case err == nil:
				case errors.As(err, &conflict):
					out.Result = "conflict"
					out.Version = conflict.Current // for the record: the model does not read it
				case errors.As(err, &wrong):
					out.Result = "wrong_state"
				case notSent(err):
					continue
				default:
					out.Result = "unknown"
				}
				record(c, in, call, out, h.now())
				testkit.Pace(runCtx, time.Duration(rng.IntN(30))*time.Millisecond)
			}
		})
	}
	if h.server != nil {
		// One crash of the server per epoch, at a random time in it.
		wg.Go(func() {
			select {
			case <-runCtx.Done():
				return
			case <-time.After(time.Duration(rand.Int64N(int64(d / 2)))):
			}
			call := h.now()
			if err := h.server.Restart(ctx, pgcluster.ShutdownImmediate); err != nil {
				h.crashErr.Store(&err)
				return
			}
			h.crashes.Add(1)
			ret := h.now()
			for i := range receipts {
				record(workers+operators+1, wInput{Op: "crash", Receipt: i}, call, wOutput{Result: "ok"}, ret)
			}
		})
	}
	wg.Go(func() { faults(runCtx, h.direct, h.proxy, &h.kills, &h.cuts) })
	wg.Wait()
	return history
}

// faults ends a random client session every 20 to 80 ms, or, one time in
// eight, cuts every client connection at the proxy, until ctx ends. A
// killed session: the server ends it. A cut: the network drops every client
// connection, and each server session finds out on its next read or write.
// Cuts are rarer: every client reconnects after one.
func faults(ctx context.Context, direct *pgxpool.Pool, proxy *faultproxy.Proxy, kills, cuts *atomic.Int64) {
	for testkit.Pace(ctx, time.Duration(20+rand.IntN(60))*time.Millisecond) {
		if rand.IntN(8) == 0 {
			if proxy.Cut() > 0 {
				cuts.Add(1)
			}
			continue
		}
		var killed bool
		err := direct.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(pid)), false) FROM (
			SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND backend_type = 'client backend'
			ORDER BY random() LIMIT 1) s`, proxiedApp).Scan(&killed)
		if err == nil && killed {
			kills.Add(1)
		}
	}
}

// The model refuses what a broken first accept would show: an identity
// accepted twice, and a claim of a receipt before its accept.
func TestWorkerModelFirstAccepts(t *testing.T) {
	op := func(call int64, in wInput, out wOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: int(call), Input: in, Call: call, Output: out, Return: call + 1}
	}
	accepted := wOutput{Result: "accepted"}
	cases := []struct {
		name    string
		history []porcupine.Operation
		legal   bool
	}{
		{"accepted, then a redelivery", []porcupine.Operation{
			op(0, wInput{Op: "accept"}, accepted),
			op(2, wInput{Op: "accept"}, wOutput{Result: "ok", Status: "PENDING"}),
			op(4, wInput{Op: "claim", Token: "t"}, wOutput{Result: "ok"}),
		}, true},
		{"accepted twice", []porcupine.Operation{
			op(0, wInput{Op: "accept"}, accepted),
			op(2, wInput{Op: "accept"}, accepted),
		}, false},
		{"claimed before its accept", []porcupine.Operation{
			op(0, wInput{Op: "claim", Token: "t"}, wOutput{Result: "ok"}),
			op(2, wInput{Op: "accept"}, accepted),
		}, false},
		{"an unknown accept, then a claim", []porcupine.Operation{
			op(0, wInput{Op: "accept"}, wOutput{Result: "unknown"}),
			op(2, wInput{Op: "claim", Token: "t"}, wOutput{Result: "ok"}),
		}, true},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(workerModel(wState{{}}), c.history); got != c.legal {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.legal)
		}
	}
}

// workerCalls is how a history worker records its calls: call before the
// call is made, ret with its outcome (and the receipt a claim took), drop
// for a call that never reached the server; id is a receipt's ID as far as
// the worker knows it.
type workerCalls interface {
	call(in wInput) int64
	ret(in wInput, call int64, out wOutput, claimed inbox.ID)
	drop(in wInput, call int64)
	id(i int) (inbox.ID, bool)
}

// directCalls records a worker goroutine's calls straight into the history.
func (h *workerHistory) directCalls(c int, record func(int, wInput, int64, wOutput, int64)) workerCalls {
	return direct{h, c, record}
}

type direct struct {
	h      *workerHistory
	c      int
	record func(int, wInput, int64, wOutput, int64)
}

func (d direct) call(wInput) int64 { return d.h.now() }
func (d direct) ret(in wInput, call int64, out wOutput, claimed inbox.ID) {
	if claimed != (inbox.ID{}) {
		d.h.learn(claimed, in.Receipt)
	}
	d.record(d.c, in, call, out, d.h.now())
}
func (direct) drop(wInput, int64)          {}
func (d direct) id(i int) (inbox.ID, bool) { return d.h.id(i) }

// workerLoop is history worker c until runCtx ends: it claims a receipt
// of a random consumer under a new token, and after a while records a
// failure under it or, rarely, runs a handler transaction completing it.
func (h *workerHistory) workerLoop(ctx, runCtx context.Context, c int, seed uint64, rec workerCalls) {
	receipts := len(h.consumers)
	rng := rand.New(rand.NewPCG(uint64(c), seed))
	for runCtx.Err() == nil {
		i := rng.IntN(receipts)
		tok := inboxtype.New()
		in := wInput{Op: "claim", Receipt: i, Token: tok.String()}
		call := rec.call(in)
		rows, err := h.claim(ctx, db.ReceiptClaimParams{Consumers: []string{h.consumers[i]}, MaxWalk: 1, MaxScopes: 1, MaxCount: 1, ClaimToken: tok, LeaseMs: 300})
		if notSent(err) {
			rec.drop(in, call)
			testkit.Pace(runCtx, 20*time.Millisecond)
			continue
		}
		out := wOutput{Result: "ok"}
		var id inbox.ID
		switch {
		case err != nil:
			out.Result = "unknown"
		case len(rows) == 0:
			out.Result = "none"
		default:
			id = rows[0].ID
		}
		rec.ret(in, call, out, id)
		// For a claim whose outcome is unknown, the receipt seen before: it
		// may have committed, and its token then holds the receipt.
		switch out.Result {
		case "ok":
		case "unknown":
			var seen bool
			if id, seen = rec.id(i); seen {
				break
			}
			fallthrough
		default:
			testkit.Pace(runCtx, time.Duration(rng.IntN(20))*time.Millisecond)
			continue
		}
		testkit.Pace(runCtx, time.Duration(rng.IntN(500))*time.Millisecond)
		// Rarely: a COMPLETED receipt changes no more until the next epoch
		// gives its consumer a new message.
		if rng.IntN(8) == 0 {
			in.Op = "complete"
			call = rec.call(in)
			rec.ret(in, call, wOutput{Result: h.complete(ctx, id, tok, rng.IntN(4) == 0)}, inbox.ID{})
			continue
		}
		in.Op = "fail"
		call = rec.call(in)
		_, err = h.q.ReceiptFail(ctx, db.ReceiptFailParams{Dead: true, DelayMs: 0, LastError: "history", ID: id, ClaimToken: tok})
		if notSent(err) {
			rec.drop(in, call)
			continue
		}
		out = wOutput{Result: "ok"}
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			out.Result = "lost"
		case err != nil:
			out.Result = "unknown"
		}
		rec.ret(in, call, out, inbox.ID{})
	}
}
