package historycheck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pginbox/pginbox/db"
	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/inbox/inboxtest"
	"github.com/pginbox/pginbox/inboxtype"
)

// wInput is an operation of the worker history on one receipt: a claim of
// its consumer under a token, a failure recorded under it, a recovery of its
// consumer's expired leases, an operator's requeue at an expected version,
// or a read.
type wInput struct {
	Op       string // claim, fail, recover, requeue, get
	Receipt  int
	Token    string
	Expected int64
}

// wOutput: Result is ok, none (a claim that took nothing), lost (a failure
// whose token no longer matched), conflict, wrong_state or unknown (the call
// failed: it may have committed); Recovered lists the receipts a recovery
// returned (none or its own); Status and Version are a read's.
type wOutput struct {
	Result    string
	Recovered []int
	Status    string
	Version   int64
}

type wReceipt struct {
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
					next = append(next, s.with(in.Receipt, wReceipt{"PROCESSING", r.Version + 1, in.Token}))
				}
			case "fail":
				match := r.Status == "PROCESSING" && r.Token == in.Token
				if (out.Result == "ok" || unknown) && match {
					next = append(next, s.with(in.Receipt, wReceipt{"DEAD", r.Version + 1, ""}))
				}
				if (out.Result == "lost" && !match) || unknown {
					next = append(next, s)
				}
			case "recover":
				// Leases expire with time the model does not see: a recovery
				// of the receipt's consumer may take it when PROCESSING.
				if (out.Result == "ok" && len(out.Recovered) == 0) || unknown {
					next = append(next, s)
				}
				if (len(out.Recovered) == 1 || unknown) && r.Status == "PROCESSING" {
					next = append(next, s.with(in.Receipt, wReceipt{"RETRYABLE", r.Version + 1, ""}))
				}
			case "requeue":
				requeued := s.with(in.Receipt, wReceipt{"PENDING", r.Version + 1, ""})
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

// TestWorkerHistory records a history of worker statements (claims, failures
// recorded under their tokens, recoveries of leases that expire after 300 ms,
// each consumer in turn)
// and operators' requeues and reads on three receipts, while a fault injector
// kills random sessions, and checks it for linearizability: the fencing by
// token and the expected versions hold under faults. HISTORY_SECONDS sets the
// run's length (default 5).
func TestWorkerHistory(t *testing.T) {
	seconds := historySeconds()
	const receipts, workers, operators = 3, 3, 3
	pool := inboxtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = workers + operators + 3 })
	ctx := t.Context()
	q := db.New(pool)
	consumers := make([]string, receipts)
	for i := range consumers {
		consumers[i] = fmt.Sprintf("c%d", i)
	}
	ids, view := seedReceipts(t, ctx, pool, consumers, 1_000_000)
	initial := make(wState, receipts)
	for i, id := range ids {
		r, err := view.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		initial[i] = wReceipt{string(r.Status), r.Version, ""}
	}
	index := map[inbox.ID]int{}
	for i, id := range ids {
		index[id] = i
	}

	start := time.Now()
	now := func() int64 { return time.Since(start).Nanoseconds() }
	var mu sync.Mutex
	var history []porcupine.Operation
	counts := map[string]int{}
	record := func(client int, in wInput, call int64, out wOutput, ret int64) {
		if out.Result == "unknown" {
			ret = 1 << 62 // it may take effect at any time from its call on
		}
		mu.Lock()
		defer mu.Unlock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
		counts[in.Op+" "+out.Result]++
	}
	runCtx, stop := context.WithTimeout(ctx, time.Duration(seconds)*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for c := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for runCtx.Err() == nil {
				i := rng.IntN(receipts)
				tok := inboxtype.New()
				in := wInput{Op: "claim", Receipt: i, Token: tok.String()}
				call := now()
				rows, err := q.ReceiptClaim(ctx, db.ReceiptClaimParams{Consumers: []string{consumers[i]}, MaxWalk: 1, MaxScopes: 1, MaxCount: 1, ClaimToken: tok, LeaseMs: 300})
				out := wOutput{Result: "ok"}
				switch {
				case err != nil:
					out.Result = "unknown"
				case len(rows) == 0:
					out.Result = "none"
				}
				record(c, in, call, out, now())
				if out.Result == "none" {
					time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
					continue
				}
				time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
				in.Op = "fail"
				call = now()
				_, err = q.ReceiptFail(ctx, db.ReceiptFailParams{Dead: true, DelayMs: 0, LastError: "history", ID: ids[i], ClaimToken: tok})
				out = wOutput{Result: "ok"}
				switch {
				case errors.Is(err, pgx.ErrNoRows):
					out.Result = "lost"
				case err != nil:
					out.Result = "unknown"
				}
				record(c, in, call, out, now())
			}
		})
	}
	wg.Go(func() {
		for n := 0; runCtx.Err() == nil; n++ {
			time.Sleep(100 * time.Millisecond / receipts)
			i := n % receipts
			call := now()
			rows, err := q.ReceiptRecover(ctx, db.ReceiptRecoverParams{Consumers: []string{consumers[i]}, MaxCount: 100})
			out := wOutput{Result: "ok", Recovered: []int{}}
			if err != nil {
				out.Result = "unknown"
			}
			for _, r := range rows {
				out.Recovered = append(out.Recovered, index[r.ID])
			}
			record(workers, wInput{Op: "recover", Receipt: i}, call, out, now())
		}
	})
	for o := range operators {
		c := workers + 1 + o
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 2))
			known := make([]int64, receipts)
			for runCtx.Err() == nil {
				i := rng.IntN(receipts)
				if rng.IntN(2) == 0 {
					call := now()
					r, err := view.Get(ctx, ids[i])
					if err != nil {
						continue // a failed read changed nothing
					}
					known[i] = r.Version
					record(c, wInput{Op: "get", Receipt: i}, call, wOutput{Result: "ok", Status: string(r.Status), Version: r.Version}, now())
					continue
				}
				in := wInput{Op: "requeue", Receipt: i, Expected: max(1, known[i]-int64(rng.IntN(2)))}
				call := now()
				_, err := view.Requeue(ctx, ids[i], inbox.ChangeParams{ExpectedVersion: in.Expected, Actor: "history", Reason: "history check"})
				out := wOutput{Result: "ok"}
				var wrong *inbox.WrongStateError
				switch {
				case err == nil:
				case errors.Is(err, inbox.ErrVersionConflict):
					out.Result = "conflict"
				case errors.As(err, &wrong):
					out.Result = "wrong_state"
				default:
					out.Result = "unknown"
				}
				record(c, in, call, out, now())
				time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
			}
		})
	}
	var faults atomic.Int64
	wg.Go(func() {
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
	})
	wg.Wait()

	model := workerModel(initial)
	checkStart := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, history, 5*time.Minute)
	checked := time.Since(checkStart).Round(time.Millisecond)
	if res != porcupine.Ok {
		dir := os.Getenv("HISTORY_DIR")
		if dir == "" {
			dir = os.TempDir()
		}
		path := filepath.Join(dir, fmt.Sprintf("worker-history-%d.html", start.UnixNano()))
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Logf("writing the history: %v", err)
		}
		if res == porcupine.Unknown {
			t.Errorf("the linearizability check ran out of time (%d operations): kept in %s", len(history), path)
		} else {
			t.Errorf("the history is not linearizable (%s): kept in %s", res, path)
		}
	}
	t.Logf("worker history: %d operations %v, %d faults (sessions killed), %s (checked in %s)", len(history), counts, faults.Load(), res, checked)
	if faults.Load() == 0 {
		t.Errorf("no session was killed: the run checked no faults")
	}
}
