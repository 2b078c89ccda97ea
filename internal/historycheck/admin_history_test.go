package historycheck

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
)

func TestMain(m *testing.M) { inboxtest.Main(m) }

// An operation on one receipt: a read of its version, or a replay at an
// expected version.
type opInput struct {
	Receipt  int
	Replay   bool
	Expected int64
}

// Outputs: a read's version; a replay's "ok", "conflict" or "unknown" (the
// call failed and may or may not have committed).
type opOutput struct {
	Version int64
	Result  string
}

// versions is the sequential specification: each receipt's version; a replay
// at the current version moves it on by one, at another one changes nothing.
func versionsModel(initial []int64) porcupine.Model {
	nm := &porcupine.NondeterministicModel{
		Init: func() []any { return []any{append([]int64(nil), initial...)} },
		Step: func(state, input, output any) []any {
			v := state.([]int64)
			in, out := input.(opInput), output.(opOutput)
			cur := v[in.Receipt]
			next := func() []int64 { n := append([]int64(nil), v...); n[in.Receipt]++; return n }
			switch {
			case !in.Replay:
				if out.Version == cur {
					return []any{v}
				}
			case out.Result == "ok":
				if in.Expected == cur {
					return []any{next()}
				}
			case out.Result == "conflict":
				if in.Expected != cur {
					return []any{v}
				}
			case out.Result == "unknown":
				if in.Expected == cur {
					return []any{v, next()}
				}
				return []any{v}
			}
			return nil
		},
		Equal: func(a, b any) bool {
			x, y := a.([]int64), b.([]int64)
			for i := range x {
				if x[i] != y[i] {
					return false
				}
			}
			return true
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(opInput), output.(opOutput)
			if !in.Replay {
				return fmt.Sprintf("get(%d) -> %d", in.Receipt, out.Version)
			}
			return fmt.Sprintf("replay(%d, v%d) -> %s", in.Receipt, in.Expected, out.Result)
		},
	}
	return nm.ToModel()
}

// TestAdminHistory runs concurrent operators reading and replaying a few
// COMPLETED receipts while a fault injector kills random sessions of theirs,
// records every operation's invocation, response and outcome, and checks the
// history: linearizable against the versions model, and every replay that
// reported success (and no more than those plus the unknown ones) is in the
// database. HISTORY_SECONDS sets the run's length (default 5);
// HISTORY_DIR keeps a failing history's visualization (default: a temporary
// directory, printed).
func TestAdminHistory(t *testing.T) {
	seconds := 5
	if s := os.Getenv("HISTORY_SECONDS"); s != "" {
		fmt.Sscan(s, &seconds)
	}
	const receipts, clients = 3, 6
	pool := inboxtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = clients + 2 })
	ctx := t.Context()
	ids := make([]inbox.ID, receipts)
	payload := `{"n":1}`
	for i := range ids {
		ids[i] = inboxtype.New()
		fp := sha256.Sum256([]byte{byte(i)})
		if _, err := db.New(pool).ReceiptAccept(ctx, db.ReceiptAcceptParams{
			ID: ids[i], ScopeKind: "global", Source: "history", Consumer: "c", MessageID: fmt.Sprint(i),
			EventType: "e", SchemaVersion: 1, Fingerprint: fp[:], Payload: &payload, Metadata: "{}", MaxAttempts: 3,
		}); err != nil {
			t.Fatal(err)
		}
		inboxtest.SetState(t, pool, ids[i], "status = 'COMPLETED', completed_at = now()")
	}
	admin, err := inbox.NewAdmin(pool, inbox.AdminConfig{})
	if err != nil {
		t.Fatal(err)
	}
	view := admin.Operator()
	initial := make([]int64, receipts)
	for i, id := range ids {
		r, err := view.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		initial[i] = r.Version
	}

	start := time.Now()
	now := func() int64 { return time.Since(start).Nanoseconds() }
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		unknown []int // per receipt
		oks     = make([]int, receipts)
	)
	unknown = make([]int, receipts)
	runCtx, stop := context.WithTimeout(ctx, time.Duration(seconds)*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), uint64(start.UnixNano())))
			known := append([]int64(nil), initial...)
			for runCtx.Err() == nil {
				i := rng.IntN(receipts)
				in := opInput{Receipt: i}
				call := now()
				if rng.IntN(3) == 0 {
					r, err := view.Get(ctx, ids[i])
					ret := now()
					if err != nil {
						continue // a failed read changed nothing
					}
					known[i] = r.Version
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: opOutput{Version: r.Version}, Return: ret})
					mu.Unlock()
					continue
				}
				in.Replay, in.Expected = true, known[i]-int64(rng.IntN(2))
				call = now()
				_, err := view.Replay(ctx, ids[i], inbox.ChangeParams{ExpectedVersion: in.Expected, Actor: "history", Reason: "history check"})
				ret := now()
				out := opOutput{Result: "ok"}
				switch {
				case err == nil:
				case errors.Is(err, inbox.ErrVersionConflict):
					out.Result = "conflict"
				default:
					// Killed session or lost commit: it may have happened, at
					// any time from its call on.
					out.Result, ret = "unknown", 1<<62
				}
				mu.Lock()
				switch out.Result {
				case "ok":
					oks[i]++
					known[i] = in.Expected + 1
				case "unknown":
					unknown[i]++
				}
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		}()
	}
	var faults atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for runCtx.Err() == nil {
			time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond)
			var killed bool
			err := pool.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(pid)), false) FROM (
				SELECT pid FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
				ORDER BY random() LIMIT 1) s`).Scan(&killed)
			if err == nil && killed {
				faults.Add(1)
			}
		}
	}()
	wg.Wait()

	model := versionsModel(initial)
	res, info := porcupine.CheckOperationsVerbose(model, history, time.Minute)
	anomalies := 0
	if res != porcupine.Ok {
		anomalies++
		dir := os.Getenv("HISTORY_DIR")
		if dir == "" {
			dir = os.TempDir()
		}
		path := filepath.Join(dir, fmt.Sprintf("admin-history-%d.html", start.UnixNano()))
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Logf("writing the history: %v", err)
		}
		t.Errorf("the history is not linearizable (%s): kept in %s", res, path)
	}
	for i, id := range ids {
		// The pool may still hold connections whose sessions were killed.
		r, err := view.Get(ctx, id)
		for try := 0; err != nil && try < clients+2; try++ {
			r, err = view.Get(ctx, id)
		}
		if err != nil {
			t.Fatal(err)
		}
		made := len(r.Replays)
		if made < oks[i] || made > oks[i]+unknown[i] {
			anomalies++
			t.Errorf("receipt %d: %d replays in the database, %d reported done and %d unknown", i, made, oks[i], unknown[i])
		}
		if r.Version != initial[i]+int64(made) {
			anomalies++
			t.Errorf("receipt %d: version %d after %d replays from version %d", i, r.Version, made, initial[i])
		}
	}
	ok, unk := 0, 0
	for i := range oks {
		ok, unk = ok+oks[i], unk+unknown[i]
	}
	t.Logf("admin history: %d operations (%d replays done, %d unknown), %d faults (sessions killed), %d anomalies, %s",
		len(history), ok, unk, faults.Load(), anomalies, res)
	if faults.Load() == 0 {
		t.Errorf("no session was killed: the run checked no faults")
	}
}
