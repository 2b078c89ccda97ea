package historycheck

import (
	"context"
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

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestMain(m *testing.M) { inboxtest.Main(m) }

// An operation: a read of one receipt's version and payload, a replay of
// one at an expected version, or a purge of every payload.
type opInput struct {
	Receipt  int
	Replay   bool
	Purge    bool
	Expected int64
}

// Outputs: a read's version and whether the payload was purged; a replay's
// "ok", "conflict", "purged" or "unknown" (the call failed and may or may
// not have committed); a purge's count, or "unknown".
type opOutput struct {
	Version int64
	Purged  bool
	Count   int64
	Result  string
}

// receipts is the sequential state: each receipt's version and whether its
// payload was purged.
type receipts struct {
	V []int64
	P []bool
}

func (r receipts) clone() receipts {
	return receipts{V: append([]int64(nil), r.V...), P: append([]bool(nil), r.P...)}
}

// purges lists the states a purge of exactly n payloads (n < 0: any number)
// can leave: it skips receipts an admin change holds locked, so any n of the
// unpurged ones.
func (r receipts) purges(n int64) []any {
	var out []any
	for mask := 0; mask < 1<<len(r.V); mask++ {
		next, k, fits := r.clone(), int64(0), true
		for i := range r.V {
			if mask&(1<<i) == 0 {
				continue
			}
			if r.P[i] {
				fits = false
				break
			}
			next.P[i], next.V[i], k = true, next.V[i]+1, k+1
		}
		if fits && (n < 0 || k == n) {
			out = append(out, next)
		}
	}
	return out
}

// versions is the sequential specification: each receipt's version; a replay
// at the current version moves it on by one, at another one changes nothing.
func versionsModel(initial []int64) porcupine.Model {
	nm := &porcupine.NondeterministicModel{
		Init: func() []any {
			return []any{receipts{V: append([]int64(nil), initial...), P: make([]bool, len(initial))}}
		},
		Step: func(state, input, output any) []any {
			r := state.(receipts)
			in, out := input.(opInput), output.(opOutput)
			if in.Purge {
				if out.Result == "unknown" {
					return r.purges(-1)
				}
				return r.purges(out.Count)
			}
			cur, purged := r.V[in.Receipt], r.P[in.Receipt]
			next := func() receipts { n := r.clone(); n.V[in.Receipt]++; return n }
			switch {
			case !in.Replay:
				if out.Version == cur && out.Purged == purged {
					return []any{r}
				}
			case out.Result == "ok":
				if in.Expected == cur && !purged {
					return []any{next()}
				}
			case out.Result == "conflict":
				if in.Expected != cur {
					return []any{r}
				}
			case out.Result == "purged":
				if in.Expected == cur && purged {
					return []any{r}
				}
			case out.Result == "unknown":
				if in.Expected == cur && !purged {
					return []any{r, next()}
				}
				return []any{r}
			}
			return nil
		},
		Equal: func(a, b any) bool {
			x, y := a.(receipts), b.(receipts)
			for i := range x.V {
				if x.V[i] != y.V[i] || x.P[i] != y.P[i] {
					return false
				}
			}
			return true
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(opInput), output.(opOutput)
			if in.Purge {
				return fmt.Sprintf("purge -> %d %s", out.Count, out.Result)
			}
			if !in.Replay {
				return fmt.Sprintf("get(%d) -> v%d purged=%v", in.Receipt, out.Version, out.Purged)
			}
			return fmt.Sprintf("replay(%d, v%d) -> %s", in.Receipt, in.Expected, out.Result)
		},
	}
	return nm.ToModel()
}

// TestAdminHistory runs concurrent operators reading and replaying a few
// COMPLETED receipts, one of them purging every payload once past 60% of the
// run, while a fault injector kills random sessions of theirs,
// records every operation's invocation, response and outcome, and checks the
// history: linearizable against the versions model, and every replay that
// reported success (and no more than those plus the unknown ones) is in the
// database. HISTORY_SECONDS sets the run's length (default 5);
// HISTORY_DIR keeps a failing history's visualization (default: a temporary
// directory, printed).
func TestAdminHistory(t *testing.T) {
	seconds := historySeconds()
	const receipts, clients = 3, 6
	// The operators' pool goes through a proxy that cuts its connections.
	pool, direct, proxy := proxiedPools(t)
	ctx := t.Context()
	ids, _ := seedReceipts(t, ctx, direct, []string{"c", "c", "c"}, 3)
	for _, id := range ids {
		inboxtest.SetState(t, direct, id, "status = 'COMPLETED', completed_at = now()")
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
		purges  []opOutput
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
			purgeAt := now() + int64(seconds)*6e8 // 60% of the run
			for runCtx.Err() == nil {
				if c == 0 && purgeAt > 0 && now() >= purgeAt {
					purgeAt = 0
					call := now()
					res, err := view.Purge(ctx, inbox.PurgeParams{Before: time.Now()})
					ret, out := now(), opOutput{Count: res.Purged, Result: "ok"}
					if err != nil {
						out, ret = opOutput{Result: "unknown"}, 1<<62
					}
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: c, Input: opInput{Purge: true}, Call: call, Output: out, Return: ret})
					purges = append(purges, out)
					mu.Unlock()
					continue
				}
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
					history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: opOutput{Version: r.Version, Purged: r.Purged()}, Return: ret})
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
				case errors.As(err, new(*inbox.PayloadPurgedError)):
					out.Result = "purged"
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
	var kills, cuts atomic.Int64
	wg.Go(func() { faults(runCtx, direct, proxy, &kills, &cuts) })
	wg.Wait()

	model := versionsModel(initial)
	// Killed sessions leave replays of unknown outcome, and every purge spans
	// all receipts, so the search can be long on a loaded machine: a check
	// that runs out of time reports Unknown, which fails too.
	checkStart := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, history, 5*time.Minute)
	checked := time.Since(checkStart)
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
		if res == porcupine.Unknown {
			t.Errorf("the linearizability check ran out of time (%d operations): kept in %s", len(history), path)
		} else {
			t.Errorf("the history is not linearizable (%s): kept in %s", res, path)
		}
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
		purged := int64(0)
		if r.Purged() {
			purged = 1
		}
		if r.Version != initial[i]+int64(made)+purged {
			anomalies++
			t.Errorf("receipt %d: version %d after %d replays and %d purges from version %d", i, r.Version, made, purged, initial[i])
		}
	}
	ok, unk := 0, 0
	for i := range oks {
		ok, unk = ok+oks[i], unk+unknown[i]
	}
	t.Logf("admin history: %d operations (%d replays done, %d unknown, purges %v), %d faults (%d sessions killed, %d cuts of every client connection), %d anomalies, %s (checked in %s)",
		len(history), ok, unk, purges, kills.Load()+cuts.Load(), kills.Load(), cuts.Load(), anomalies, res, checked.Round(time.Millisecond))
	if kills.Load() == 0 || cuts.Load() == 0 {
		t.Errorf("%d sessions killed, %d connection cuts: the run did not check every fault", kills.Load(), cuts.Load())
	}
}
